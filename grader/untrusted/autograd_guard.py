"""Autograd in a replay run: unavailable in the runs that decide grades ("block"), as torch
ships in the runs that only explain ("watch") and under the "flag" policy ("open").

A gradient earns credit only as the student's own formula, so the judge asks two questions of
the replay (grader/replay/run.py): what does the notebook compute when no derivative of
torch's can be had, and, where it reached for one, what does it compute when it can? A
gradient right only in the second is torch's, not the student's.

What "unavailable" rests on is not in this module and not in any Python object: the warm
server switched torch's derivative code off in the dispatcher and in torch's derivative
helpers (derivative_block.py), and a blocked run seals that before its first cell. Switching
grad mode on, calling the engine or torch.func by any route then finds no graph, no tangent
and no derivative kernel. What this module adds is for the student's sake and the TAs':
- the documented entry points (torch.autograd.grad and backward, Tensor.backward and hooks,
  torch.func / functorch, torch.autograd.functional, forward_ad, TorchScript and compile, the
  engine itself, grad mode switched on) refuse with a message that says why, and are noted;
- an audit hook, which no Python code can remove, refuses what reaches under the dispatcher
  (ctypes, the garbage collector's object lists, /proc, torch's derivative source files, a
  folder opened as a file), new processes and threads; it holds only immutable state, so a
  frame or traceback that reaches it can change nothing;
- ctypes's function pointers that call without an audit event (memmove, cast, the cached
  pythonapi) are taken out of the loaded ctypes, and no extension module can be loaded (or
  made again from its first copy, as _ctypes would be): the warm server loaded the standard
  library's own beforehand, less those made for testing CPython's internals;
- signal handlers other than the runner's alarm are refused;
- after each statement the runner asks check() whether grad mode is on or a graph was built:
  a sign the entry points were worked around, listed for the TAs (it cannot earn anything).
"""

from __future__ import annotations

import _imp
import _signal
import _thread
import importlib
import os
import pathlib
import resource
import signal
import stat
import sys
import threading

import torch

from . import derivative_block
from .derivative_block import AutogradUnavailable
from .protocol import BLOCK, MAX_EVENTS, OPEN, WATCH  # noqa: F401 (the modes install() takes)

# Python entry points a blocked run replaces, module by module: each refuses and says why.
ENTRY_POINTS = {
    "torch.autograd": ("grad", "backward"),
    "torch.autograd.functional": ("vjp", "jvp", "jacobian", "hessian", "vhp", "hvp"),
    "torch.autograd.forward_ad": ("make_dual", "enter_dual_level", "dual_level"),
    "torch.func": ("grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "linearize"),
    "torch._functorch.apis": ("grad", "grad_and_value"),
    "torch._functorch.eager_transforms": (
        "grad",
        "grad_and_value",
        "vjp",
        "jvp",
        "jacrev",
        "jacfwd",
        "hessian",
        "linearize",
    ),
    "torch.jit": ("script", "trace", "trace_module", "load", "CompilationUnit"),
    "torch": ("compile",),
}
TENSOR_METHODS = ("backward", "register_hook", "register_post_accumulate_grad_hook")
# ctypes's ways to call C without an audit event: function pointers made at its import, and
# the addresses they are made from. A blocked run finds none of them.
CTYPES_UNAUDITED = (
    "memmove",
    "memset",
    "cast",
    "_cast",
    "string_at",
    "_string_at",
    "wstring_at",
    "_wstring_at",
    "_memmove_addr",
    "_memset_addr",
    "_cast_addr",
    "_string_at_addr",
    "_wstring_at_addr",
    "pythonapi",
    "pydll",
    "cdll",
    "CDLL",
    "PyDLL",
    "CFUNCTYPE",
    "PYFUNCTYPE",
    "_CFuncPtr",
    "_c_functype_cache",
    "_dlopen",
    "dlopen",
    "call_function",
    "call_cdeclfunction",
)
SIGNALS = ("signal", "setitimer", "alarm", "set_wakeup_fd", "pthread_kill", "pthread_sigmask", "siginterrupt")
# Audited events a blocked run refuses: each reaches under the dispatcher or beside the run.
# BESIDE only bounds the run (a fork bomb is hostile, not a way to a derivative): noted as
# "refused", where the rest is noted as "tamper" (the TAs see it).
BESIDE = frozenset(
    {"os.fork", "os.forkpty", "os.posix_spawn", "os.exec", "os.spawn", "os.system", "subprocess.Popen"}
)
REFUSED = frozenset(
    {
        "ctypes.dlopen",
        "ctypes.dlsym",
        "ctypes.call_function",
        "ctypes.cdata",
        "ctypes.cdata/buffer",
        "ctypes.string_at",
        "ctypes.wstring_at",
        "ctypes.create_string_buffer",
        "ctypes.create_unicode_buffer",
        "gc.get_objects",
        "gc.get_referrers",
        "gc.get_referents",
        "os.fork",
        "os.forkpty",
        "os.posix_spawn",
        "os.exec",
        "os.spawn",
        "os.system",
        "subprocess.Popen",
    }
)


class Guard:
    """One blocked run's notes, as the runner sees them: `events` is what the run's record
    reports (protocol.py's AutogradEvent), `where` the statement running (the runner sets it).
    Nothing here keeps autograd off: editing it can hide a note, nothing more."""

    def __init__(self):
        self.events: list[dict] = []
        self.where: tuple[str, int | None] = ("", None)
        self._seen: set = set()
        self._nodes = torch._C._autograd._get_sequence_nr()

    def note(self, kind: str, what: str) -> None:
        key = (kind, what, self.where)
        if key not in self._seen and len(self.events) < MAX_EVENTS:
            self._seen.add(key)
            self.events.append({"kind": kind, "what": what, "cell": self.where[0], "line": self.where[1]})

    def refuse(self, what: str, *, autograd: bool = True, kind: str = "tamper"):
        self.note("call" if autograd else kind, what)
        why = ": a gradient must be your own formula (autograd only checks your work)" if autograd else ""
        raise AutogradUnavailable(f"{what} is not available when the autograder replays your notebook{why}")

    def check(self) -> None:
        """After each statement: what was refused in it, and signs the entry points were
        worked around (grad mode on, an autograd node made since the last statement)."""
        while derivative_block.CALLS:
            self.note("call", derivative_block.CALLS.pop(0))
        if torch._C.is_grad_enabled():
            self.note("bypass", "grad mode switched on")
        nodes = torch._C._autograd._get_sequence_nr()
        if nodes != self._nodes:
            self.note("bypass", "an autograd graph")
        self._nodes = nodes


def install(mode: str) -> Guard | None:
    """Called once in the run's own process, before the run's first cell."""
    if mode != BLOCK:
        derivative_block.lift()
        return None
    return confine(prepare())


def prepare() -> Guard:
    """What a blocked run's guard changes in its process: torch's derivative code sealed off,
    grad mode off, the entry points replaced, ctypes's unaudited calls taken out. A run group
    (run_group.py), which runs no student code, prepares once for all of its runs: each is a
    fork that starts with it in place, and does not copy the pages it changes (some 1,600
    page faults a run). Its alarm handler must be set before: then no handler may be."""
    guard = Guard()
    derivative_block.seal()
    torch._C._set_grad_enabled(False)
    _replace_entry_points(guard)
    _without_ctypes_calls()
    return guard


def confine(guard: Guard) -> Guard:
    """In the run's own process, last before its first cell: no process of its own, and the
    audit hook, which no code of the run can remove."""
    resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))
    sys.addaudithook(_audit_hook(guard, frozenset(_identities(derivative_block.derivative_files()))))
    return guard


def _without_ctypes_calls() -> None:
    """torch imports ctypes: what it left that calls C unaudited goes (the audit hook refuses
    importing _ctypes again, which would bring it back)."""
    for name in ("ctypes", "_ctypes"):
        module = sys.modules.get(name)
        for attr in CTYPES_UNAUDITED if module else ():
            module.__dict__.pop(attr, None)
    sys.modules.pop("_ctypes", None)


def _identities(paths: list[str]):
    for path in paths:
        st = os.stat(path)
        yield st.st_dev, st.st_ino


def _audit_hook(guard: Guard, protected: frozenset):
    """Every variable of this hook is immutable or a C function, and the hook itself is held by
    the interpreter alone: its frame, reached from a traceback, holds nothing to change. A file
    is judged by what it is (device and inode, symlinks followed), not by its name."""
    refused, beside, note, stat_of, is_dir = REFUSED, BESIDE, guard.note, os.stat, stat.S_ISDIR
    proc_dev = os.stat("/proc").st_dev if os.path.isdir("/proc") else None
    plain = (str, bytes, int, pathlib.PosixPath, pathlib.PurePosixPath)

    def hook(event, args):
        why = event if event in refused else None
        if event == "import" and type(args[0]) is str and args[0].partition(".")[0] in ("ctypes", "_ctypes"):
            why = "loading ctypes"
        if why is None and event == "open":
            path = args[0]
            if type(path) not in plain:
                why = "open with a path of the student's own type"
            else:
                try:
                    st = stat_of(path)
                except (OSError, ValueError, TypeError):
                    st = None
                if st is not None and (
                    (st.st_dev, st.st_ino) in protected or st.st_dev == proc_dev or is_dir(st.st_mode)
                ):
                    why = "opening torch's derivative code, /proc or a folder"
        if why:
            try:
                note("refused" if why in beside else "tamper", why)
            except Exception:  # noqa: BLE001 - the note is the student's to spoil, not the refusal
                pass
            raise AutogradUnavailable(f"{why} is not available when the autograder replays your notebook")

    return hook


def _replace_entry_points(guard: Guard) -> None:
    for module_name, names in ENTRY_POINTS.items():
        module = importlib.import_module(module_name)
        for name in names:
            if hasattr(module, name):
                setattr(module, name, _refuser(guard, f"{module_name}.{name}"))
    for name in TENSOR_METHODS:
        setattr(torch.Tensor, name, _refuser(guard, f"Tensor.{name}"))
    torch.autograd.variable.Variable._execution_engine = _Refusing(guard, "the autograd engine")
    torch._C._set_grad_enabled = _grad_mode(guard)
    threads = _refuser(guard, "a thread (the replay runs on one)", autograd=False, kind="refused")
    _thread.start_new_thread = _thread.start_new = threading._start_new_thread = threads
    _imp.create_dynamic = _imp.create_builtin = _refuser(guard, "loading an extension module", autograd=False)
    for module in (signal, _signal):
        for name in SIGNALS:
            if hasattr(module, name):
                setattr(module, name, _refuser(guard, f"signal.{name}", autograd=False))


class _Refusing:
    """Stands for an object whose every method refuses (the autograd engine)."""

    def __init__(self, guard: Guard, what: str):
        self._refused = _refuser(guard, what)

    def __getattr__(self, name):
        return self._refused


def _refuser(guard: Guard, what: str, *, autograd: bool = True, kind: str = "tamper"):
    def refused(*args, **kwargs):
        guard.refuse(what, autograd=autograd, kind=kind)

    refused.__name__ = what.rpartition(".")[2]
    return refused


def _grad_mode(guard: Guard):
    """Grad mode may stay off (torch.no_grad), never go on. It is off already in a blocked
    run, so nothing needs the original switch: nothing here holds it."""

    def switch(mode, *args):
        if mode:
            guard.refuse("grad mode (torch.enable_grad, set_grad_enabled(True))")

    switch.__name__ = "_set_grad_enabled"
    return switch
