"""A static scan of the student's cells for autograd and dynamic tricks.

It only flags: the replay decides grades. A flag lists the submission for a TA.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from ..exercise import spec
from ..exercise.cells import strip_magics

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
PATCHABLE = {"torch", "F", "nn", "np", "numpy", "builtins", "grader", "math", "os", "sys", "random"}
SUSPECT_MODULES = {
    "importlib",
    "functorch",
    "pickle",
    "builtins",
    "ctypes",
    "subprocess",
    "inspect",
    "gc",
    "grader",
    "socket",
    "shutil",
    "signal",
    "multiprocessing",
    "threading",
}


@dataclass
class Finding:
    cell: str
    line: int
    what: str
    code: str
    kind: str = "tamper"  # "autograd", "file", "dynamic": normal in a student's own checking cells

    @property
    def serious(self) -> bool:
        """Suspicious wherever it is ("tamper"), or only in an answer cell."""
        return self.kind == "tamper" or self.cell in ANSWER_LABELS

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
    return Finding(label, call.lineno, "opens a file outside the submission folder", line, "tamper")


def scan_source(label: str, source: str) -> list[Finding]:
    try:
        tree = ast.parse(strip_magics(source))
    except SyntaxError as e:
        return [Finding(label, e.lineno or 0, "does not parse", e.msg or "")]
    scanner = _Scanner(label, source.split("\n"))
    scanner.visit(tree)
    return sorted(scanner.found, key=lambda f: (f.line, f.what))


class _Scanner(ast.NodeVisitor):
    """One visit per kind of node that can be a sign; every node is visited."""

    def __init__(self, label: str, lines: list[str]):
        self.label, self.lines, self.found = label, lines, []

    def _code(self, node) -> str:
        return self.lines[node.lineno - 1] if 0 < getattr(node, "lineno", 0) <= len(self.lines) else ""

    def _add(self, node, what: str, kind: str = "tamper") -> None:
        self.found.append(Finding(self.label, node.lineno, what, self._code(node), kind))

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in AUTOGRAD_ATTRS:
            self._add(node, AUTOGRAD_ATTRS[node.attr], "autograd")
        elif node.attr in INTROSPECTION_ATTRS:
            self._add(node, f"introspects the interpreter (.{node.attr})")
        elif node.attr in FILE_READERS:
            self._add(node, FILE_READERS[node.attr], "file")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Attribute) and node.func.attr in FILE_READERS:
            outside = _file_access(self.label, node, self._code(node))
            if outside.kind == "tamper":
                self.found.append(outside)
        elif isinstance(node.func, ast.Name):
            self._named_call(node, node.func.id)
        self.generic_visit(node)

    def _named_call(self, node: ast.Call, fn: str) -> None:
        name = node.args[1] if len(node.args) > 1 else None
        if fn == "open":
            self.found.append(_file_access(self.label, node, self._code(node)))
        elif fn in DYNAMIC_CALLS:
            self._add(
                node, DYNAMIC_CALLS[fn], "dynamic" if fn in ("globals", "vars", "setattr") else "tamper"
            )
        elif (
            fn in ("getattr", "hasattr", "delattr")
            and name is not None
            and not isinstance(name, ast.Constant)
        ):
            self._add(node, f"calls {fn}() with a computed name")
        elif (
            fn in ("getattr", "delattr")
            and isinstance(name, ast.Constant)
            and str(name.value) in AUTOGRAD_ATTRS
        ):
            self._add(node, AUTOGRAD_ATTRS[str(name.value)], "autograd")

    def _assignment(self, node, targets: list) -> None:
        for target in targets:
            for sub in ast.walk(target):
                if (
                    isinstance(sub, ast.Attribute)
                    and isinstance(sub.value, ast.Name)
                    and sub.value.id in PATCHABLE
                ):
                    self._add(node, f"replaces {sub.value.id}.{sub.attr}")
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        self._assignment(node, node.targets)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._assignment(node, [node.target])

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._assignment(node, [node.target])

    def _imports(self, node, modules: list[str]) -> None:
        for m in modules:
            top = m.split(".")[0]
            if m.startswith(("torch.autograd", "torch.func")) or top == "functorch":
                self._add(node, f"imports {m}", "autograd")
            elif top in SUSPECT_MODULES:
                self._add(node, f"imports {m}")
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        self._imports(node, [a.name for a in node.names])

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        self._imports(node, [a.name for a in node.names] + ([node.module] if node.module else []))
