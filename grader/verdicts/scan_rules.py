"""The scan's rules on names (scan.py applies them): which modules, attributes and names in a
student's cell are code that is not theirs to use, and of which kind.

"autograd": torch computes the derivative, not the student. Besides torch.autograd and torch.func
that is torch's own derivative code: its backward and forward-AD ops (any name with `_backward`,
`_jvp`, `_make_dual` or `_unpack_dual`: `torch.ops.aten.tanh_backward`, `torch._C._nn.nll_loss_backward`,
`torch._softmax_backward_data`), the Python-level helpers (torch._decomp, torch._refs, torch.nn.grad)
and its finite differences (torch.autograd.gradcheck). `.backward()` is scan.py's own rule.
"tampering": the signal module (a handler runs inside whatever frame the signal interrupts, the
grader's included) and the other modules a submission has no reason to import.

A name the student binds in their own cells (`dlogits_backward = ...`, `def my_backward`) is theirs,
unless it is reached through torch or another shared module (`torch.ops.aten.my_backward`).
"""

from __future__ import annotations

import ast
from collections import OrderedDict

from ..exercise import spec
from ..exercise.cells import strip_magics
from .budget import Budget, OverBudget, for_cell, for_submission, parse

DERIVATIVE_MARKS = ("_backward", "_jvp", "_make_dual", "_unpack_dual")
AUTOGRAD_MODULES = (
    "torch.autograd",
    "torch.func",
    "functorch",
    "torch._decomp",
    "torch._refs",
    "torch.nn.grad",
)
HELPER_ATTRS = {
    "_decomp": "uses torch._decomp",
    "decomposition_table": "uses torch._decomp",
    "get_decompositions": "uses torch._decomp",
    "core_aten_decompositions": "uses torch._decomp",
    "_refs": "uses torch._refs",
    "gradcheck": "uses torch's finite differences (gradcheck)",
    "gradgradcheck": "uses torch's finite differences (gradcheck)",
    "get_numerical_jacobian": "uses torch's finite differences (gradcheck)",
    "get_analytical_jacobian": "uses torch.autograd.gradcheck",
}
# callees that look an op up by its name: torch._C._jit_get_operation("aten::tanh_backward")
OP_LOOKUPS = ("torch._C", "torch.ops", "torch._ops", "torch.library", "torch.jit")
SIGNAL_MODULES = {"signal", "_signal"}
SIGNAL_ATTRS = {
    "setitimer",
    "set_wakeup_fd",
    "pthread_kill",
    "pthread_sigmask",
    "siginterrupt",
    "raise_signal",
}
SUSPECT_MODULES = SIGNAL_MODULES | {
    "importlib",
    "pickle",
    "builtins",
    "ctypes",
    "subprocess",
    "inspect",
    "gc",
    "grader",
    "socket",
    "shutil",
    "multiprocessing",
    "threading",
}
Sign = tuple[str, str]  # what, kind
SEEN_CELLS = 64  # the instructor's locked cells, the same in every plan, and room for others
# (each text at most ANALYSIS_CELL_CHARS: a longer one is refused before it is read)
_seen: OrderedDict[str, tuple[frozenset[str], int]] = OrderedDict()  # source -> names, nodes


def derivative_op(name: str) -> bool:
    return any(mark in name for mark in DERIVATIVE_MARKS)


def own_names(tree: ast.AST) -> set[str]:
    """The names a cell binds itself (variables, functions, classes, arguments, attributes it
    sets), and the kit's own manual_backward. Not an import's: `from torch import
    _softmax_backward_data` binds torch's."""
    out = {spec.EX4_FUNCTION}
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            out.add(n.id)
        elif isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store):
            out.add(n.attr)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(n.name)
        elif isinstance(n, ast.arg):
            out.add(n.arg)
    return out


def bound_names(sources: list[str]) -> set[str]:
    """What the cells bind themselves (own_names), the ones that do not parse left out, and those
    over their budget (budget.py: the scan does not scan them either)."""
    out: set[str] = set()
    submission = for_submission()
    for source in sources:
        cell = for_cell(submission)
        try:
            cell.take(len(source))
            out |= _cell_names(source, cell)
        except (SyntaxError, ValueError):
            continue
        except OverBudget as e:
            if e.level == "submission":
                break
    return out


def _cell_names(source: str, cell: Budget) -> frozenset[str]:
    """own_names of one cell. A text seen before (every plan repeats the locked cells) is charged
    the nodes it cost then, not parsed again."""
    if source in _seen:
        _seen.move_to_end(source)
        names, nodes = _seen[source]
        cell.spend(nodes)
        return names
    before = cell.spent
    names = frozenset(own_names(parse(strip_magics(source), cell)))
    _seen[source] = (names, cell.spent - before)
    if len(_seen) > SEEN_CELLS:
        _seen.popitem(last=False)
    return names


def import_sign(module: str) -> Sign | None:
    """`import m`, `from m import x` (as "m.x"), `__import__("m")`."""
    if any(module == m or module.startswith(m + ".") for m in AUTOGRAD_MODULES):
        return f"imports {module}", "autograd"
    parts = module.split(".")
    if parts[0] in ("torch", "functorch") and any(derivative_op(p) for p in parts):
        return f"imports torch's derivative op {module}", "autograd"
    return (f"imports {module}", "tampering") if parts[0] in SUSPECT_MODULES else None


def imported_signs(module: str | None, names: list[str]) -> list[Sign]:
    """`from module import names`: the module's sign, or each name's, as `module.name` (`from
    torch.nn import grad` is torch.nn.grad) or as itself (`from . import pickle`)."""
    if module and (sign := import_sign(module)):
        return [sign]
    full = [f"{module}.{name}" if module else name for name in names]
    return [s for f, n in zip(full, names) if (s := import_sign(f) or import_sign(n))]


def attribute_sign(attr: str, dotted: str | None, shared: bool, own: set[str]) -> Sign | None:
    """`x.attr`, `dotted` its whole chain when it starts at a plain name; `shared` when that name
    is a module every cell shares (torch, F, nn, ...)."""
    if attr in own and not shared:
        return None  # the student's own method or attribute: self.my_backward()
    if dotted in ("torch.nn.grad", "nn.grad"):
        return "uses torch.nn.grad", "autograd"
    if derivative_op(attr):
        return f"uses torch's derivative op {attr}", "autograd"
    if attr in HELPER_ATTRS:
        return HELPER_ATTRS[attr], "autograd"
    if attr in SIGNAL_ATTRS:  # the same words as name_sign's for signal.setitimer: one finding
        return f"uses the signal module ({dotted or '.' + attr})", "tampering"
    return None


def name_sign(name: str, attr: str | None, own: set[str]) -> Sign | None:
    """A plain name read (`attr` when it is read from it): not the student's, so torch's or a
    module's: `from torch._C._nn import *` then nll_loss_backward(...); signal.setitimer(...)."""
    if name in own:
        return None
    if derivative_op(name):
        return f"uses torch's derivative op {name}", "autograd"
    if name in SIGNAL_MODULES:
        return f"uses the signal module ({name}{'.' + attr if attr else ''})", "tampering"
    return None


def lookup_sign(callee: str | None, args: list[ast.expr]) -> Sign | None:
    """An op looked up by its name in a string: torch._C._jit_get_operation("aten::tanh_backward"),
    torch.ops.aten.__getattr__("tanh_backward")."""
    if not callee or not (callee.startswith(OP_LOOKUPS) or callee.endswith(".__getattr__")):
        return None
    for arg in args:
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and derivative_op(arg.value):
            return f"uses torch's derivative op {arg.value}", "autograd"
    return None
