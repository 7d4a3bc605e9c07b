"""What the student's code sets, for the judge's hints: the statement that raised is blamed on
the gradients it would have set (runner.py records them with the error), and a gradient the
answer cell never assigned may be there under a name of the student's own."""

from __future__ import annotations

import ast

import torch


def assigned(stmt) -> set[str]:
    """The names a statement sets: those it binds, and the tensors it changes in place
    (`x[i] = ...`, `x[i] += ...`, `x.index_add_(...)`)."""
    names = set()
    for node in ast.walk(stmt):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.Subscript, ast.Attribute)) and isinstance(node.ctx, ast.Store):
            names.add(_base(node))
        elif isinstance(node, ast.Call) and _in_place(node.func):
            names.add(_base(node.func.value))
    names.discard(None)
    return names


def _in_place(func) -> bool:
    """A tensor method that changes its tensor: `add_`, `index_add_`, `scatter_`, ..."""
    return isinstance(func, ast.Attribute) and func.attr.endswith("_") and not func.attr.startswith("_")


def _base(node):
    """The name at the root of `x[i].y`, or None."""
    while isinstance(node, (ast.Subscript, ast.Attribute)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def own_names(ns: dict, before: set, shapes: set[tuple], lecture: set[str], most: int) -> list[str]:
    """Names new since `before` (the names the cell found) that the lecture does not use
    (`lecture`), holding a tensor of one of `shapes` (those of the gradients the cell left
    unassigned): where a rename may be."""
    found = []
    for name, value in ns.items():
        if len(found) == most:
            break
        if not isinstance(name, str) or not name.isidentifier() or name in lecture or name.startswith("_"):
            continue
        if name not in before and isinstance(value, torch.Tensor) and tuple(value.shape) in shapes:
            found.append(name)
    return found
