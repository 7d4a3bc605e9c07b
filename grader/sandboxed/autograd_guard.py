"""Autograd in a replay run: watched in every run, unavailable in the runs that decide grades.

A gradient earns credit only as the student's own formula, so the judge asks two questions of
the replay (grader/replay/run.py): what does the notebook compute when autograd cannot run
("block"), and, where the student's code reached for autograd, what does it compute when it
can ("watch")? A gradient that is right only in the second is autograd's, not the student's.

What "cannot run" rests on, from the easiest to undo to the hardest:
- the documented entry points (torch.autograd.grad and backward, Tensor.backward and hooks,
  torch.func / functorch, torch.autograd.functional, forward_ad, TorchScript and compile, grad
  mode switched on) are replaced by functions that say so and raise AutogradUnavailable, and so
  is every other reference torch keeps to what starts a derivative (HELD);
- a profile hook sees every call to a C function however it was reached (an alias, importlib,
  a reloaded module, exec of a decoded string), and at the end of each statement reads
  autograd's node counter: an engine entry point called, grad mode found on, or any graph
  built means the replacements were worked around. A blocked run stops there at once;
- an audit hook, which no Python code can remove, refuses what could remove the profile hook
  or reach under it: sys.setprofile / settrace (cProfile too), ctypes, the garbage collector's
  object lists, /proc (the process's own memory), and new processes;
- no thread can start (replaced, and RLIMIT_NPROC 0 for the sandbox's user): all the run's work
  happens on the one thread the hook watches. The guard is installed before the run's first
  cell, so a cell added above the answers is watched too.
"""

from __future__ import annotations

import _thread
import importlib
import os
import resource
import signal
import sys
import threading

import torch

BLOCK, WATCH, OPEN = "block", "watch", "open"  # OPEN: no guard at all (the "flag" policy's grades)
STOPPED = 86  # the run's exit status when it was stopped for working around the guard
STOPPED_STATUS = "stopped where it worked around the kit's autograd check"  # the server's word for it
MAX_EVENTS = 50

# C functions that compute or prepare derivatives: watched wherever they are called from.
ENGINE = {
    "run_backward": "the autograd engine",
    "_enter_dual_level": "forward-mode AD",
    "_grad_increment_nesting": "torch.func's grad transform",
    "_jvp_increment_nesting": "torch.func's jvp transform",
    "_jit_script_compile": "TorchScript",
    "_jit_script_class_compile": "TorchScript",
    "_create_function_from_trace": "torch.jit.trace",
    "_create_method_from_trace": "torch.jit.trace",
    "import_ir_module": "torch.jit.load",
    "import_ir_module_from_buffer": "torch.jit.load",
    "start_new_thread": "a thread beside the watched one",  # its replacement never calls it
}
UNHOOK = {"setprofile": "sys.setprofile", "settrace": "sys.settrace"}
# C functions that start a derivative, replaced wherever torch keeps a reference (torch's own
# modules import some under other names): called from C (itertools.starmap), a kept original
# would be out of the profile hook's sight. Reverse mode needs no such list: any graph at all
# is seen by the node counter.
HELD = {
    ("torch._C", "_enter_dual_level"): "forward-mode AD",
    ("torch._C._functorch", "_grad_increment_nesting"): "torch.func's grad transform",
    ("torch._C._functorch", "_jvp_increment_nesting"): "torch.func's jvp transform",
}
_held_at: list[tuple[str, str, str]] = []  # (module, attribute, what): found once, by preload()
# Python entry points a blocked run replaces, module by module.
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
# Audited events a blocked run refuses. Refusing sys.setprofile keeps the hook even where Python
# itself would take it away (a hook that raised); a student's own call is a sign of tampering.
REFUSED = {
    "sys.setprofile": "refuse",
    "sys.settrace": "refuse",
    "ctypes.dlopen": "refuse",
    "ctypes.dlsym": "refuse",
    "ctypes.call_function": "refuse",
    "ctypes.cdata": "refuse",
    "ctypes.cdata/buffer": "refuse",
    "gc.get_objects": "refuse",
    "gc.get_referrers": "refuse",
    "gc.get_referents": "refuse",
    # the hook watches this thread: nothing may run beside it (RLIMIT_NPROC says so too, but a
    # run as root, without the sandbox's own user, is not held by it; Python 3.11 audits no
    # thread start: _replace_entry_points replaces it)
    "os.fork": "refuse",
    "os.forkpty": "refuse",
    "os.posix_spawn": "refuse",
    "os.exec": "refuse",
    "os.spawn": "refuse",
    "os.system": "refuse",
    "subprocess.Popen": "refuse",
}


class AutogradUnavailable(RuntimeError):
    """Raised where a blocked run reaches for autograd: the answer must be a formula."""


class Guard:
    """One run's guard, as the runner sees it: `events` is what the run's record reports
    (record.py's AutogradEvent) and `where` the statement running (the runner sets it). What
    stops a run is not here: the hooks keep it in closures no student code can reach, so that
    editing this object can hide a note but never keep a run going."""

    def __init__(self):
        self.events: list[dict] = []
        self.where: tuple[str, int | None] = ("", None)
        self._seen: set = set()

    def note(self, kind: str, what: str) -> dict:
        event = {"kind": kind, "what": what, "cell": self.where[0], "line": self.where[1]}
        key = (kind, what, self.where)
        if key not in self._seen and len(self.events) < MAX_EVENTS:
            self._seen.add(key)
            self.events.append(event)
        return event

    def refuse(self, what: str, *, autograd: bool = True):
        self.note("call" if autograd else "refused", what)
        why = ": a gradient must be your own formula (autograd only checks your work)" if autograd else ""
        raise AutogradUnavailable(f"{what} is not available when the autograder replays your notebook{why}")


_EXIT = os._exit  # taken at import, before the runner hands the student a harmless os._exit


def install(mode: str, on_stop) -> Guard:
    """Called once in the run's own process, before the run's first cell. `on_stop(guard)`
    sends what the run has so far; the process then ends, whatever on_stop did."""
    guard, block, exit_now = Guard(), mode == BLOCK, _EXIT
    set_grad = torch._C._set_grad_enabled

    def tell(kind: str, what: str) -> None:
        try:
            guard.note(kind, what)
        except BaseException:  # noqa: BLE001 - a hook must not raise: Python would unhook it
            pass

    def stop(kind: str, what: str) -> None:
        tell(kind if block else "call", what)
        if block:
            try:
                on_stop(guard)
            except BaseException:  # noqa: BLE001
                pass
            finally:
                exit_now(STOPPED)

    set_grad(False)  # as the replay server left it: no graph is recorded
    if block:
        _replace_entry_points(guard)
        resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))
    sys.setprofile(_profile_hook(stop, tell))
    if block:
        sys.addaudithook(_audit_hook(guard, stop))
        sys.getprofile = lambda: None  # the hook is reachable from nowhere else
    return guard


def interrupted_in_guard(frame) -> bool:
    """For SIGALRM's handler (runner.py): an exception raised in a hook would unhook it."""
    return frame is not None and frame.f_code.co_filename == _HERE


_HERE = __file__


def _profile_hook(stop, tell):
    """Every call into a C function, every return: autograd's entry points by name, grad mode by
    state, and, at the end of each statement, whether any autograd graph was built since the
    last (the sequence number of autograd's nodes only grows, and only grad mode makes nodes):
    that catches even a chain of C calls that switches grad mode on and off between two events."""
    grad_on, names = torch._C.is_grad_enabled, dict(ENGINE)  # copies: edits of ENGINE change nothing
    rearm = signal.setitimer
    unhookers = (sys, threading)  # their setprofile / settrace; cProfile's Profiler.enable is audited alike

    graph_counter = torch._C._autograd._get_sequence_nr  # read, not made: no op, no dispatch
    last = [graph_counter()]

    def check(frame, event, arg) -> None:
        if event == "c_call":
            name = getattr(arg, "__name__", None)
            what = names.get(name)
            if what:
                stop("bypass", what)
            elif name in UNHOOK and getattr(arg, "__self__", None) in unhookers:
                tell("tamper", UNHOOK[name])  # the audit hook refuses it
        if grad_on():
            stop("bypass", "grad mode switched on")
        if event == "return" and frame.f_code.co_name == "<module>":  # a statement ended
            now = graph_counter()
            if now != last[0]:
                stop("bypass", "an autograd graph")
            last[0] = now

    def hook(frame, event, arg):
        # A hook that raises is unhooked by Python: nothing may leave it. stop() exits by itself;
        # a statement's time running out (SIGALRM, runner.py) is raised again outside the hook.
        try:
            check(frame, event, arg)
        except Exception:  # noqa: BLE001
            pass
        except BaseException:  # noqa: BLE001
            rearm(signal.ITIMER_REAL, 0.001)

    return hook


def _audit_hook(guard: Guard, stop):
    refused, realpath, fsdecode = dict(REFUSED), os.path.realpath, os.fsdecode

    def hook(event, args):
        how = refused.get(event)
        if how is None and event == "open" and isinstance(args[0], (str, bytes)):
            how = "refuse" if realpath(fsdecode(args[0])).startswith("/proc") else None
        if how == "stop":
            stop("tamper", event)
        if how:
            try:
                guard.note("refused", event)
            except BaseException:  # noqa: BLE001
                pass
            raise AutogradUnavailable(f"{event} is not available when the autograder replays your notebook")

    return hook


def preload() -> list[tuple[str, str, str]]:
    """Once, in the warm server: the modules whose entry points a blocked run replaces, and
    every place in torch's modules that holds one of the HELD functions (about 20 ms)."""
    for module_name in ENTRY_POINTS:
        importlib.import_module(module_name)
    originals = {id(getattr(sys.modules[m], a)): what for (m, a), what in HELD.items()}
    _held_at[:] = [
        (name, attr, originals[id(value)])
        for name, module in list(sys.modules.items())
        if name.split(".")[0] in ("torch", "functorch")
        and isinstance(getattr(module, "__dict__", None), dict)
        for attr, value in list(vars(module).items())
        if id(value) in originals
    ]
    return _held_at


def _replace_entry_points(guard: Guard) -> None:
    for module_name, attr, what in _held_at or preload():
        setattr(sys.modules[module_name], attr, _refuser(guard, what))
    for module_name, names in ENTRY_POINTS.items():
        module = importlib.import_module(module_name)
        for name in names:
            if hasattr(module, name):
                setattr(module, name, _refuser(guard, f"{module_name}.{name}"))
    for name in TENSOR_METHODS:
        setattr(torch.Tensor, name, _refuser(guard, f"Tensor.{name}"))
    for module, name in ((torch._C, "_set_grad_enabled"), (torch._C, "_set_fwd_grad_enabled")):
        setattr(module, name, _switch(guard, getattr(module, name), name))
    threads = _refuser(guard, "a thread (the replay runs on one)", autograd=False)
    _thread.start_new_thread = _thread.start_new = threading._start_new_thread = threads


def _refuser(guard: Guard, what: str, *, autograd: bool = True):
    def refused(*args, **kwargs):
        guard.refuse(what, autograd=autograd)

    refused.__name__ = what.rpartition(".")[2]
    return refused


def _switch(guard: Guard, original, name: str):
    """Grad mode may be switched off (torch.no_grad), never on."""

    def switch(mode, *args):
        if mode:
            guard.refuse("grad mode (torch.enable_grad, set_grad_enabled(True))")
        return original(mode, *args)

    switch.__name__ = name
    return switch
