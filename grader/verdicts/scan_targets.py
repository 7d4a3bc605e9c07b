"""What a student's expression names in the modules every cell and the grader share (PATCHABLE),
for scan.py: `torch.nn.functional.x` from an attribute chain, and what an assignment replaces in
them (`torch.arange = f`, `vars(torch)["arange"] = f`, `sys.modules["torch"] = fake`).
"""

from __future__ import annotations

import ast

PATCHABLE = {"torch", "F", "nn", "np", "numpy", "builtins", "grader", "math", "os", "sys", "random"}


def dotted(node) -> str | None:
    """`torch.nn.functional.x` for an attribute chain that starts at a plain name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return ".".join([node.id, *reversed(parts)]) if isinstance(node, ast.Name) else None


def shared(node) -> str | None:
    """The dotted name if it belongs to a module every cell and the grader share (PATCHABLE)."""
    name = dotted(node)
    return name if name and name.split(".")[0] in PATCHABLE else None


def key(node) -> str:
    return str(node.value) if isinstance(node, ast.Constant) else "<computed>"


def replaced(target) -> list[str]:
    """What an assignment (or del) target rebinds in a shared module. Only its own structure
    counts: `sm[torch.arange(n), Yb] -= 1` modifies `sm`; `torch.arange = f` replaces torch's."""
    if isinstance(target, (ast.Tuple, ast.List)):
        return [name for elt in target.elts for name in replaced(elt)]
    if isinstance(target, ast.Starred):
        return replaced(target.value)
    if isinstance(target, ast.Attribute):
        return [name] if (name := shared(target)) else []
    if not isinstance(target, ast.Subscript):
        return []
    inner = target.value
    if isinstance(inner, ast.Attribute) and inner.attr == "__dict__" and (owner := shared(inner.value)):
        return [f"{owner}.{key(target.slice)}"]  # torch.__dict__["arange"] = f
    is_vars = isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name) and inner.func.id == "vars"
    if is_vars and inner.args and (owner := shared(inner.args[0])):
        return [f"{owner}.{key(target.slice)}"]  # vars(torch)["arange"] = f
    return [name] if (name := shared(inner)) else []  # sys.modules["torch"] = fake
