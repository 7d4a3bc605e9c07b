"""A cell's code in the canonical form similarity.py fingerprints: comments and spacing gone,
the student's own names "_", each block in a canonical order (topologically by the data
dependencies, independent statements by text), then the tokens, each with its line.

Its work is bounded (verdicts/budget.py): each statement's key and effects cost its nodes, at
each nesting level it is sorted in, and a block's order the square of its statements; all of it
is counted before it is done, against the cell's and the submission's budgets, so a cell of many
sortable blocks (issue 17: `if 0:` blocks of 400 lines) is over its budget, not quadratic.
"""

from __future__ import annotations

import ast
import copy
import heapq
import re
from collections import Counter

from ..exercise.cells import strip_magics
from ..settings import MAX_SORTED_STATEMENTS
from ..verdicts.budget import Budget, parse, walk

_TOKEN = re.compile(r"[A-Za-z_]\w*|\d[\w.]*|\S")
_COMPOUND = (ast.FunctionDef, ast.ClassDef, ast.For, ast.While, ast.If, ast.With)  # async ones: a leaf
_FLOW = (ast.Return, ast.Raise, ast.Break, ast.Continue, ast.Global, ast.Nonlocal)
_NAMED = {ast.Name: "id", ast.arg: "arg", ast.FunctionDef: "name"}


def _rename(tree, fixed: set[str]):
    """The student's own names -> "_", and 1 spelt as 1.0. One placeholder, not v0, v1... by first
    use: a helper inserted by a copier would renumber every later one."""
    for node in ast.walk(tree):
        attr = _NAMED.get(type(node))
        if attr and getattr(node, attr) not in fixed:
            setattr(node, attr, "_")
        elif isinstance(node, ast.Constant) and type(node.value) is int and abs(node.value) < 2**53:
            node.value = float(node.value)
    return tree


def _base_name(node) -> str | None:
    while isinstance(node, (ast.Subscript, ast.Attribute, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _effects(stmt) -> tuple[set, set, bool]:
    """Names a statement reads, names it may change, and whether it steers control flow. The
    order only has to be the same for two copies, so what a copier cannot swap is enough."""
    reads, writes = set(), set()
    for node in ast.walk(stmt):
        if isinstance(node, ast.Name):
            (reads if isinstance(node.ctx, ast.Load) else writes).add(node.id)
        elif isinstance(node, (ast.Subscript, ast.Attribute)) and not isinstance(node.ctx, ast.Load):
            writes.add(_base_name(node))  # dC[ix] += ... changes dC
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", "")[-1:] == "_":
            writes.add(_base_name(node.func))  # torch's in-place methods: x.add_(y) changes x
    if isinstance(stmt, ast.Expr):
        writes |= reads  # a bare call may change whatever it is given
    flow = not isinstance(stmt, _COMPOUND[:2]) and any(isinstance(n, _FLOW) for n in ast.walk(stmt))
    return reads | (writes if isinstance(stmt, ast.AugAssign) else set()), writes, flow


def _sizes(tree, budget: Budget) -> dict[int, int]:
    """The nodes under each node, itself included, in one pass (ast.walk is breadth first:
    every node comes after its parent)."""
    size = {}
    for node in reversed(list(walk(tree, budget))):
        size[id(node)] = 1 + sum(size[id(c)] for c in ast.iter_child_nodes(node))
    return size


def _canonical(stmts: list, fixed: set[str], budget: Budget, sizes: dict[int, int]) -> list:
    """The block in a canonical order: dependent statements keep theirs, the others by text.
    Renames in place: each statement's effects are read first, by the names as written, before
    any block under it is renamed (a copy of each statement to rename was most of the cost)."""
    stmts = [s for s in stmts if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    n = len(stmts)
    sorted_here = n <= MAX_SORTED_STATEMENTS
    if sorted_here:
        budget.spend(2 * sum(sizes.get(id(s), 1) for s in stmts) + n * (n - 1) // 2)  # keys, effects, pairs
        eff = [_effects(s) for s in stmts]
    for s in (s for s in stmts if isinstance(s, _COMPOUND)):
        s.body = _canonical(s.body, fixed, budget, sizes)
        s.orelse = _canonical(getattr(s, "orelse", []), fixed, budget, sizes)
    if not sorted_here:
        return stmts
    keys = [ast.dump(_rename(s, fixed)) for s in stmts]
    dep = lambda a, b: a[2] or b[2] or a[1] & (b[0] | b[1]) or a[0] & b[1]  # b must stay after a
    after = [[j for j in range(i + 1, n) if dep(eff[i], eff[j])] for i in range(n)]
    waiting = Counter(j for js in after for j in js)
    ready, out = [(keys[i], i) for i in range(n) if not waiting[i]], []
    heapq.heapify(ready)  # Kahn's topological sort, the smallest text first among the ready
    while ready:
        i = heapq.heappop(ready)[1]
        out.append(stmts[i])
        for j in after[i]:
            waiting[j] -= 1
            if not waiting[j]:
                heapq.heappush(ready, (keys[j], j))
    return out


def _emit(stmts: list, tokens: list[str], line_of: list[int], budget: Budget) -> None:
    for s in stmts:
        head = copy.copy(s)
        if isinstance(s, _COMPOUND):  # the header alone, then the blocks
            head.body, head.orelse = [ast.Pass()], []
        found = _TOKEN.findall(ast.unparse(head)) + [";"]
        budget.spend(len(found))
        tokens += found
        line_of += [s.lineno] * len(found)
        if isinstance(s, _COMPOUND):
            _emit(s.body + s.orelse, tokens, line_of, budget)


def statements(source: str, budget: Budget | None = None) -> list:
    """The cell's statements; a cell that does not parse as a whole, line by line."""
    budget = budget or Budget("reference")
    stmts = []
    for n, text in enumerate([source] + source.split("\n")):
        try:
            tree = parse(text if n == 0 else text.strip(), budget)
        except (SyntaxError, ValueError):  # ValueError: a null byte
            continue
        if n == 0:
            return tree.body
        stmts += ast.increment_lineno(tree, n - 1).body
    return stmts


def tokens(source: str, fixed: set[str], budget: Budget | None = None) -> tuple[list[str], list[int]]:
    """The canonical form's tokens, and each one's line. OverBudget past the budget (None: the
    instructor's text, not bounded)."""
    budget = budget or Budget("reference")
    tree = ast.Module(statements(strip_magics(source), budget), [])
    sizes = _sizes(tree, budget)
    tree.body = _canonical(tree.body, fixed, budget, sizes)
    budget.spend(len(sizes))
    out, line_of = [], []
    _emit(_rename(tree, fixed).body, out, line_of, budget)
    return out, line_of
