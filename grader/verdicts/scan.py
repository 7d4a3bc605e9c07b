"""A static scan of the student's cells for autograd and dynamic tricks.

It only flags: the replay decides grades. A flag lists the submission for a TA. The rules on
modules and on torch's own derivative code are in scan_rules.py. Bounded (budget.py): a cell over
its size, work or time, or past its submission's, is not scanned and is a "too_large" sign.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from ..exercise import spec
from ..exercise.cells import strip_magics
from .budget import TOO_LARGE, Budget, OverBudget, for_cell, for_submission, parse, walk
from .scan_rules import attribute_sign, import_sign, imported_signs, lookup_sign, name_sign, own_names
from .scan_targets import dotted, key, replaced, shared

ANSWER_LABELS = set(spec.ANSWER_CELLS.values())

AUTOGRAD_ATTRS = {
    "grad": "reads .grad",
    "backward": "calls .backward()",
    "retain_grad": "calls .retain_grad()",
    "requires_grad": "sets requires_grad",
    "requires_grad_": "calls requires_grad_()",
    "enable_grad": "uses torch.enable_grad",
    "set_grad_enabled": "uses torch.set_grad_enabled",
    "autograd": "uses torch.autograd",
    "func": "uses torch.func",
    "vjp": "uses vjp",
    "jacobian": "uses a jacobian",
}
INTROSPECTION_ATTRS = {
    "_getframe",
    "f_locals",
    "f_globals",
    "f_back",
    "__dict__",
    "__globals__",
    "__builtins__",
    "__subclasses__",
    "__code__",
    "gi_frame",
    "tb_frame",
}
DYNAMIC_CALLS = {
    "exec": "calls exec()",
    "eval": "calls eval()",
    "compile": "calls compile()",
    "__import__": "calls __import__()",
    "open": "opens a file",
    "globals": "touches globals()",
    "setattr": "calls setattr()",
    "vars": "calls vars()",
}
FILE_READERS = {
    "load": "loads a file",
    "loadtxt": "loads a file",
    "fromfile": "loads a file",
    "read_text": "reads a file",
    "read_bytes": "reads a file",
}


# The kinds a TA sees (reports/suspicious.json). These are suspicious wherever they are; the
# others ("autograd", "file", "dynamic") are normal in a student's own checking cells.
ANYWHERE = {"tampering", "introspection", "unparsable", TOO_LARGE}
# Calls whose result cannot carry a gradient into an answer: what they get is only looked at.
SHOWN = {"print", "display", "pprint", "cmp"}
LOOKS = SHOWN | {"abs", "max", "min", "sum", "mean", "norm", "item", "all", "any", "allclose", "equal"}
LOOKS |= {"isclose", "assert_close", "float", "int", "round", "len", "type", "isinstance", "repr", "str"}


@dataclass
class Finding:
    cell: str
    line: int
    what: str
    code: str
    kind: str = "tampering"  # ANYWHERE, or "autograd", "file", "dynamic"

    @property
    def serious(self) -> bool:
        """Suspicious wherever it is (ANYWHERE), or only in an answer cell."""
        return self.kind in ANYWHERE or self.cell in ANSWER_LABELS

    def text(self) -> str:
        return f"{self.cell}, line {self.line}: {self.what}: {self.code.strip()[:100]}"


def _file_access(label: str, call: ast.Call, line: str) -> Finding:
    """A file by a plain relative name is the student's own; a path that climbs out, is
    absolute or is computed reaches outside the submission folder."""
    arg = call.args[0] if call.args else None
    if (
        isinstance(arg, ast.Constant)
        and isinstance(arg.value, str)
        and not arg.value.startswith(("/", "~"))
        and ".." not in arg.value
    ):
        return Finding(label, call.lineno, "opens a file", line, "file")
    return Finding(label, call.lineno, "opens a file outside the submission folder", line, "tampering")


def scan_source(
    label: str, source: str, own: set[str] | frozenset[str] = frozenset(), budget: Budget | None = None
) -> list[Finding]:
    """`own`: the names the student's other cells bind (scan_rules.bound_names), theirs here too.
    `budget`: the submission's (budget.for_submission(), one for all its cells; None: this cell's
    own only). A cell over its budget, or past the submission's, is one "too_large" finding."""
    cell = for_cell(budget or for_submission())
    try:
        cell.take(len(source))
        tree = parse(strip_magics(source), cell)
    except (SyntaxError, ValueError) as e:  # ValueError: a null byte
        why = getattr(e, "msg", None) or str(e)
        return [Finding(label, getattr(e, "lineno", None) or 0, "does not parse", why, "unparsable")]
    except OverBudget as e:
        return [Finding(label, 1, "not scanned, too large", str(e), TOO_LARGE)]
    scanner = _Scanner(label, source.split("\n"), tree, own, cell)
    try:
        scanner.visit(tree)
    except (OverBudget, RecursionError) as e:  # what was found so far stays
        scanner.found.append(
            Finding(label, 1, "not scanned, too large", str(e) or "nested too deeply", TOO_LARGE)
        )
    once = {(f.line, f.what): f for f in scanner.found}  # torch._decomp.decomposition_table: one
    return sorted(once.values(), key=lambda f: (f.line, f.what))


class _Scanner(ast.NodeVisitor):
    """One visit per kind of node that can be a sign; every node is visited."""

    def __init__(self, label: str, lines: list[str], tree: ast.AST, own, budget: Budget):
        self.label, self.lines, self.found, self.budget = label, lines, [], budget
        self.own = own_names(tree) | own
        self.parent = {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        # a cell that rebinds print (`def print(x): ...`) makes "only looked at" mean nothing
        bound = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        bound |= {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        bound |= {a.asname or a.name for a in ast.walk(tree) if isinstance(a, ast.alias)}
        self.looks = LOOKS - bound

    def visit(self, node):
        self.budget.spend()
        return super().visit(node)

    def _code(self, node) -> str:
        return self.lines[node.lineno - 1] if 0 < getattr(node, "lineno", 0) <= len(self.lines) else ""

    def _add(self, node, what: str, kind: str = "tampering") -> None:
        self.found.append(Finding(self.label, node.lineno, what, self._code(node), kind))

    def visit_Attribute(self, node: ast.Attribute) -> None:
        sign = attribute_sign(node.attr, dotted(node), shared(node) is not None, self.own)
        if sign:
            self._add(node, *sign)
        elif node.attr == "grad":
            what = self._grad_use(node)
            if what:
                self._add(node, what, "autograd")
        elif node.attr in AUTOGRAD_ATTRS:
            self._add(node, AUTOGRAD_ATTRS[node.attr], "autograd")
        elif node.attr in INTROSPECTION_ATTRS:
            self._add(node, f"introspects the interpreter (.{node.attr})", "introspection")
        elif node.attr in FILE_READERS:
            self._add(node, FILE_READERS[node.attr], "file")
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        up = self.parent.get(id(node))
        attr = up.attr if isinstance(up, ast.Attribute) and up.value is node else None
        if isinstance(node.ctx, ast.Load) and (sign := name_sign(node.id, attr, self.own)):
            self._add(node, *sign)

    def _grad_use(self, node: ast.Attribute) -> str | None:
        """A `.grad` is a sign only where its value can go into an answer: not where it is only
        printed, compared or asserted, nor cleared (`p.grad = None`, as the lecture does)."""
        up = self.parent.get(id(node))
        if isinstance(node.ctx, ast.Del) or (isinstance(up, ast.Call) and up.func is node):
            return None  # del p.grad; torch.autograd.grad(...) is a function, flagged by its module
        if isinstance(node.ctx, ast.Store):
            clears = isinstance(up, ast.Assign) and isinstance(up.value, ast.Constant)
            return None if clears and up.value.value is None else "sets .grad"
        return None if self._only_looked_at(node) else "reads .grad"

    def _only_looked_at(self, node) -> bool:
        child, up = node, self.parent.get(id(node))
        while up is not None and not isinstance(up, ast.stmt):
            self.budget.spend()
            if isinstance(up, ast.NamedExpr):
                return False  # (x := W1.grad) keeps it, wherever it is
            if isinstance(up, ast.Call) and child is not up.func and _call_name(up) in SHOWN & self.looks:
                return True  # print(W1.grad), cmp(...): they return nothing to compute with
            child, up = up, self.parent.get(id(up))
        if isinstance(up, ast.Assert) or (isinstance(up, (ast.If, ast.While)) and child is up.test):
            return True
        # a bare expression is the cell's output: looked at, unless one of its calls may keep it
        calls = (
            [c for c in walk(up.value, self.budget) if isinstance(c, ast.Call)]
            if isinstance(up, ast.Expr)
            else None
        )
        return calls is not None and all(_call_name(c) in self.looks for c in calls)

    def visit_Call(self, node: ast.Call) -> None:
        sign = lookup_sign(dotted(node.func), node.args)
        if sign:
            self._add(node, *sign)
        name = _call_name(node)
        module = node.args[0] if node.args and name in ("__import__", "import_module") else None
        if isinstance(module, ast.Constant) and isinstance(module.value, str):
            self._import_signs(node, [module.value])  # __import__("signal")
        if isinstance(node.func, ast.Attribute) and node.func.attr in FILE_READERS:
            outside = _file_access(self.label, node, self._code(node))
            if outside.kind == "tampering":
                self.found.append(outside)
        elif isinstance(node.func, ast.Name):
            self._named_call(node, node.func.id)
        self.generic_visit(node)

    def _named_call(self, node: ast.Call, fn: str) -> None:
        name = node.args[1] if len(node.args) > 1 else None
        owner = shared(node.args[0]) if node.args else None
        if fn == "open":
            self.found.append(_file_access(self.label, node, self._code(node)))
        elif fn in ("setattr", "delattr") and owner and name is not None:
            self._add(node, f"{'replaces' if fn == 'setattr' else 'deletes'} {owner}.{key(name)}")
        elif fn in DYNAMIC_CALLS:
            self._add(
                node, DYNAMIC_CALLS[fn], "dynamic" if fn in ("globals", "vars", "setattr") else "tampering"
            )
        elif (
            fn in ("getattr", "hasattr", "delattr")
            and name is not None
            and not isinstance(name, ast.Constant)
        ):
            self._add(node, f"calls {fn}() with a computed name")
        elif fn in ("getattr", "delattr") and isinstance(name, ast.Constant):
            attr = str(name.value)
            sign = attribute_sign(attr, None, owner is not None, self.own)
            if sign or attr in AUTOGRAD_ATTRS:
                self._add(node, *(sign or (AUTOGRAD_ATTRS[attr], "autograd")))

    def _assignment(self, node, targets: list, verb: str = "replaces") -> None:
        for target in targets:
            for name in replaced(target):
                self._add(node, f"{verb} {name}")
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        self._assignment(node, node.targets)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._assignment(node, [node.target])

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._assignment(node, [node.target])

    def visit_Delete(self, node: ast.Delete) -> None:
        self._assignment(node, node.targets, "deletes")

    def _import_signs(self, node, modules: list[str]) -> None:
        for sign in filter(None, map(import_sign, modules)):
            self._add(node, *sign)

    def visit_Import(self, node: ast.Import) -> None:
        self._import_signs(node, [a.name for a in node.names])
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        for sign in imported_signs(node.module, [a.name for a in node.names]):
            self._add(node, *sign)
        self.generic_visit(node)


def _call_name(call: ast.Call) -> str | None:
    """`print` for print(...), `allclose` for torch.allclose(...) or (a - b).abs().max()'s `max`."""
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
