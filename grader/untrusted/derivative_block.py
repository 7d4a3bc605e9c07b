"""Torch's own derivative code, switched off where torch runs it: in the dispatcher's tables
and in the code objects of torch's Python derivative helpers. The warm server (server.py)
switches it all off once, before any run forks; a blocked run seals that state before its
first cell, and a watched or open run switches it back on.

What a blocked run then lacks does not depend on any Python object the student could reach:
- every operator's autograd kernel is a fallthrough: no operator records a graph or carries a
  forward-mode tangent, whatever grad mode says (torch.autograd, torch.func, forward_ad and
  TorchScript get no derivative from any operator);
- every operator torch names as a derivative (`*_backward*`, `*_jvp`, `*_grad`, dual numbers;
  DERIVATIVE, matched against torch's own list of registered operators) has a kernel that
  refuses, at every dispatch key it has a kernel for, so torch.ops, torch._C._nn, torch.*,
  decompositions and graphs all land on it;
- the Python functions of torch's derivative helpers (DERIVATIVE_CODE: decompositions, refs,
  torch.nn.grad, gradcheck's finite differences, the fused linear + cross-entropy that computes
  its gradients in its forward, per-sample gradients) and the backward of every autograd
  Function torch defines in Python have code that refuses, and the helpers' source files
  cannot be opened (autograd_guard's audit hook), so they cannot be loaded again.
The registrations live in C++; their Python handles are kept alive by a reference count that
no Python object holds (seal()), so nothing the student can reach can take them back.
"""

from __future__ import annotations

import functools
import importlib.util
import linecache
import os
import pkgutil
import re
import sys
import types
import warnings

import torch
from torch.library import fallthrough_kernel

DERIVATIVE = re.compile(r"backward|_jvp$|(?<!retain)(?<!retains)_grad$|^_fw_primal|_make_dual|_unpack_dual")
DERIVATIVE_CODE = (
    "torch._decomp",
    "torch._refs",
    "torch.nn.grad",
    "torch.autograd.gradcheck",
    "torch.nn.modules.linear_cross_entropy",
    "torch.nn.modules._functions",
    "torch.nn.utils._expanded_weights",
    "torch._lobpcg",
)
FUNCTION_DERIVATIVES = ("backward", "jvp", "vjp", "vmap")  # an autograd Function's own
UNAVAILABLE = (
    "is torch's own derivative code: not available when the autograder replays your notebook "
    "(a gradient must be your own formula)"
)
AUTOGRAD_KEYS = ("AutogradCPU", "AutogradOther", "AutogradNestedTensor", "AutogradMeta")


# A derivative operator is refused at each of these it has a kernel for, and always on the CPU
# (a registration there wins over a composite kernel) and at the composite key (decompose()).
def _parsable(key: str) -> bool:
    try:
        torch._C._dispatch_has_kernel_for_dispatch_key("aten::add.Tensor", key)
        return True
    except RuntimeError:  # a key torch lists but does not take here (QuantizedHIP, ...)
        return False


KERNEL_KEYS = tuple(
    k
    for k in torch._C.DispatchKey.__members__
    if not k.startswith(("Autograd", "StartOf", "EndOf")) and _parsable(k)
)
CALLS: list[str] = []  # what a run asked for and was refused (the runner notes them)

_HANDLES: list = []  # the registrations; sealed or reset in each run
_CODES: dict = {}  # function -> its own code, while it can still be switched back on
_FILES: tuple[str, ...] = ()  # derivative_files(), as install() found them


class AutogradUnavailable(RuntimeError):
    """Raised where a blocked run reaches for a derivative that is not its own formula."""


def derivative_ops() -> list[str]:
    """Every registered operator whose name says it computes a derivative, from torch itself."""
    return sorted(
        n
        for n in torch._C._dispatch_get_all_op_names()
        if DERIVATIVE.search(n.partition("::")[2].partition(".")[0])
    )


def _refuse(name: str, *args, **kwargs):
    CALLS.append(name)
    raise AutogradUnavailable(f"{name} {UNAVAILABLE}")


def install() -> None:
    """Once, in the warm server, before the first fork: every operator's autograd kernel a
    fallthrough, every derivative operator refused, torch's derivative helpers refused."""
    derivative = set(derivative_ops())
    kernels = _kernels_by_op(AUTOGRAD_KEYS + KERNEL_KEYS)
    libraries: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "overriding a previously registered kernel", by design
        for name in torch._C._dispatch_get_all_op_names():
            ns, _, op = name.partition("::")
            if ns not in libraries:
                libraries[ns] = torch._C._dispatch_library("IMPL", ns, "")
            if name in derivative:
                _register_refusal(libraries[ns], name, op, kernels.get(name, set()))
            else:
                _register_fallthrough(libraries[ns], op, kernels.get(name, set()))
    _HANDLES.extend(libraries.values())
    _neutralise_helpers()
    _ready_for_runs()


def _ready_for_runs() -> None:
    """What each run's seal() and guard would otherwise do for themselves, at 8 to 12 ms a run
    (freeing what the fork had just copied): find the helpers' files once; one reference more to
    each helper's own code, which no object holds, so that a blocked run drops the table without
    freeing 1,271 code objects; the lines of source read so far, cleared here."""
    import ctypes

    global _FILES
    _FILES = tuple(derivative_files())
    for code in _CODES.values():
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(code))
    linecache.clearcache()


def _kernels_by_op(keys: tuple[str, ...]) -> dict[str, set[str]]:
    """Operator -> which of `keys` it has a kernel for: the dispatcher's list for each key, one call
    a key (the answers _dispatch_has_kernel_for_dispatch_key gives operator by operator, 50,000
    calls and 0.2 CPU-s a server)."""
    found: dict[str, set[str]] = {}
    for key in keys:
        for name in torch._C._dispatch_get_registrations_for_dispatch_key(key):
            found.setdefault(name, set()).add(key)
    return found


def _register_fallthrough(library, op: str, kernels: set[str]) -> None:
    library.impl(op, "Autograd", fallthrough_kernel, False)
    for key in AUTOGRAD_KEYS:  # a kernel registered for one backend's key wins over the alias
        if key in kernels:
            library.impl(op, key, fallthrough_kernel, False)


def _register_refusal(library, name: str, op: str, kernels: set[str]) -> None:
    refuse = functools.partial(_refuse, name)
    keys = {"Autograd", "CPU", "CompositeImplicitAutograd"} | kernels
    for key in sorted(keys):
        library.impl(op, key, refuse, False)


def lift() -> None:
    """A watched or open run: torch as it ships."""
    for handle in _HANDLES:
        handle.reset()
    _HANDLES.clear()
    for fn, code in _CODES.items():
        fn.__code__ = code
    _CODES.clear()


def seal() -> None:
    """A blocked run, before its first cell: the registrations stay for the life of the
    process (a reference no object holds), and the helpers' own code is gone."""
    import ctypes

    for handle in _HANDLES:
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(handle))
    _HANDLES.clear()
    _CODES.clear()
    linecache.clearcache()


def derivative_files() -> list[str]:
    """The source files of torch's derivative helpers and their compiled copies: a blocked
    run may open none of them (autograd_guard's audit hook; nor any folder, so no path
    relative to an open folder gets past it), so none can be loaded again. Once install() has
    found them (it imports every helper first), the same list each time."""
    if _FILES:
        return list(_FILES)
    paths = []
    for name in DERIVATIVE_CODE:
        path = getattr(sys.modules.get(name), "__file__", None)
        if path and path.endswith("__init__.py"):
            top = os.path.dirname(path)
            paths += [os.path.join(d, f) for d, _, files in os.walk(top) for f in files]
        elif path:
            paths += [path, importlib.util.cache_from_source(path)]
    return sorted({os.path.realpath(p) for p in paths if os.path.isfile(p)})


def _code_files() -> frozenset[str]:
    """The source files whose functions are torch's derivative helpers."""
    return frozenset(p for p in derivative_files() if p.endswith(".py"))


def _neutralise_helpers() -> None:
    _import_helpers()
    for fn in _helper_functions(_code_files()) + _function_backwards():
        if fn not in _CODES:
            _CODES[fn] = fn.__code__
            fn.__code__ = _refusing_code(fn)


def _import_helpers() -> None:
    """Every module of the helpers' packages, so that all their functions are found."""
    for name in DERIVATIVE_CODE:
        try:
            module = importlib.import_module(name)
            for info in pkgutil.walk_packages(getattr(module, "__path__", []), prefix=name + "."):
                importlib.import_module(info.name)
        except Exception:  # noqa: BLE001 - a helper this torch lacks (or cannot import) is no helper
            pass


def _function_backwards() -> list[types.FunctionType]:
    """The backward (and jvp, vjp) of every torch.autograd.Function defined in torch's files."""
    torch_dir = os.path.dirname(torch.__file__) + os.sep
    found, pending = [], list(torch.autograd.Function.__subclasses__())
    while pending:
        cls = pending.pop()
        pending += cls.__subclasses__()
        for name in FUNCTION_DERIVATIVES:
            fn = getattr(vars(cls).get(name), "__func__", vars(cls).get(name))
            if isinstance(fn, types.FunctionType) and fn.__code__.co_filename.startswith(torch_dir):
                found.append(fn)
    return found


def _helper_functions(files: frozenset[str]) -> list[types.FunctionType]:
    """Every function whose code is in one of `files`: from the helpers' modules, their classes
    and the decomposition tables, unwrapped."""
    found, seen, real = [], set(), functools.lru_cache(maxsize=None)(os.path.realpath)
    pending = [v for m in _helper_modules() for v in list(vars(m).values())]
    pending += [
        v
        for m in _helper_modules()
        for c in vars(m).values()
        if isinstance(c, type)
        for v in vars(c).values()
    ]
    tables = [torch._decomp.decomposition_table, *torch._decomp.global_decomposition_table.values()]
    pending += [v for table in tables for v in list(table.values())]
    while pending:
        value = pending.pop()
        value = getattr(value, "__func__", value)  # staticmethod / classmethod
        if not isinstance(value, types.FunctionType) or id(value) in seen:
            continue
        seen.add(id(value))
        wrapped = getattr(value, "__wrapped__", None)
        if wrapped is not None:
            pending.append(wrapped)
        if real(value.__code__.co_filename) in files:  # a file's path resolved once, not per function
            found.append(value)
    return found


def _helper_modules() -> list[types.ModuleType]:
    return [m for name, m in list(sys.modules.items()) if m is not None and name.startswith(DERIVATIVE_CODE)]


_PLACEHOLDER = "\0refused\0"
_templates: dict[tuple[str, ...], types.CodeType] = {}


def _refusing_code(fn: types.FunctionType) -> types.CodeType:
    """Code for `fn` that only refuses, with `fn`'s free variables (so it fits `fn`'s closure)."""
    free = fn.__code__.co_freevars
    if free not in _templates:
        source = "def _outer():\n"
        source += "".join(f"    {v} = None\n" for v in free)
        source += "    def _refused(*args, **kwargs):\n"
        source += f"        ({', '.join(free)},)\n" if free else ""
        source += f"        raise RuntimeError({_PLACEHOLDER!r})\n    return _refused\n"
        namespace: dict = {}
        exec(compile(source, "<refused>", "exec"), namespace)
        _templates[free] = namespace["_outer"]().__code__
    template = _templates[free]
    message = f"{fn.__module__}.{fn.__qualname__} {UNAVAILABLE}"
    consts = tuple(message if c == _PLACEHOLDER else c for c in template.co_consts)
    return template.replace(co_consts=consts, co_name=fn.__code__.co_name, co_qualname=fn.__qualname__)
