"""A static scan of the student's cells for autograd and dynamic tricks.

It only flags: the replay decides grades. A flag lists the submission for a TA.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from ..exercise import spec
from ..exercise.cells import strip_magics

ANSWER_LABELS = set(spec.ANSWER_CELLS.values())

AUTOGRAD_ATTRS = {"grad": "reads .grad", "backward": "calls .backward()", "retain_grad": "calls .retain_grad()",
                  "requires_grad": "sets requires_grad", "requires_grad_": "calls requires_grad_()",
                  "enable_grad": "uses torch.enable_grad", "set_grad_enabled": "uses torch.set_grad_enabled",
                  "autograd": "uses torch.autograd", "func": "uses torch.func", "vjp": "uses vjp",
                  "jacobian": "uses a jacobian"}
INTROSPECTION_ATTRS = {"_getframe", "f_locals", "f_globals", "f_back", "__dict__", "__globals__",
                       "__builtins__", "__subclasses__", "__code__", "gi_frame", "tb_frame"}
DYNAMIC_CALLS = {"exec": "calls exec()", "eval": "calls eval()", "compile": "calls compile()",
                 "__import__": "calls __import__()", "open": "opens a file", "globals": "touches globals()",
                 "setattr": "calls setattr()", "vars": "calls vars()"}
FILE_READERS = {"load": "loads a file", "loadtxt": "loads a file", "fromfile": "loads a file",
                "read_text": "reads a file", "read_bytes": "reads a file"}
PATCHABLE = {"torch", "F", "nn", "np", "numpy", "builtins", "grader", "math", "os", "sys", "random"}
SUSPECT_MODULES = {"importlib", "functorch", "pickle", "builtins", "ctypes", "subprocess", "inspect", "gc",
                   "grader", "socket", "shutil", "signal", "multiprocessing", "threading"}


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
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str) \
            and not arg.value.startswith(("/", "~")) and ".." not in arg.value:
        return Finding(label, call.lineno, "opens a file", line, "file")
    return Finding(label, call.lineno, "opens a file outside the submission folder", line, "tamper")


def scan_source(label: str, source: str) -> list[Finding]:
    lines = source.split("\n")
    code = lambda node: lines[node.lineno - 1] if 0 < getattr(node, "lineno", 0) <= len(lines) else ""
    try:
        tree = ast.parse(strip_magics(source))
    except SyntaxError as e:
        return [Finding(label, e.lineno or 0, "does not parse", e.msg or "")]
    found: list[Finding] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in AUTOGRAD_ATTRS:
            found.append(Finding(label, node.lineno, AUTOGRAD_ATTRS[node.attr], code(node), "autograd"))
        elif isinstance(node, ast.Attribute) and node.attr in INTROSPECTION_ATTRS:
            found.append(Finding(label, node.lineno, f"introspects the interpreter (.{node.attr})", code(node)))
        elif isinstance(node, ast.Attribute) and node.attr in FILE_READERS:
            found.append(Finding(label, node.lineno, FILE_READERS[node.attr], code(node), "file"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in FILE_READERS:
            outside = _file_access(label, node, code(node))
            if outside.kind == "tamper":
                found.append(outside)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            fn = node.func.id
            if fn == "open":
                found.append(_file_access(label, node, code(node)))
            elif fn in DYNAMIC_CALLS:
                kind = "dynamic" if fn in ("globals", "vars", "setattr") else "tamper"
                found.append(Finding(label, node.lineno, DYNAMIC_CALLS[fn], code(node), kind))
            elif fn in ("getattr", "hasattr", "delattr") and len(node.args) > 1 and not isinstance(node.args[1], ast.Constant):
                found.append(Finding(label, node.lineno, f"calls {fn}() with a computed name", code(node)))
            elif fn in ("getattr", "delattr") and len(node.args) > 1 and isinstance(node.args[1], ast.Constant) \
                    and str(node.args[1].value) in AUTOGRAD_ATTRS:
                found.append(Finding(label, node.lineno, AUTOGRAD_ATTRS[str(node.args[1].value)], code(node), "autograd"))
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for sub in ast.walk(t):
                    if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and sub.value.id in PATCHABLE:
                        found.append(Finding(label, node.lineno, f"replaces {sub.value.id}.{sub.attr}", code(node)))
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            mods = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
            for m in mods:
                top = m.split(".")[0]
                if m.startswith("torch.autograd") or m.startswith("torch.func") or top == "functorch":
                    found.append(Finding(label, node.lineno, f"imports {m}", code(node), "autograd"))
                elif top in SUSPECT_MODULES:
                    found.append(Finding(label, node.lineno, f"imports {m}", code(node)))
    return sorted(found, key=lambda f: (f.line, f.what))
