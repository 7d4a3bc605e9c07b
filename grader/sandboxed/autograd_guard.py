"""Autograd in a replay run: watched in every run, unavailable in the runs that decide grades.

A gradient earns credit only as the student's own formula, so the judge asks two questions of
the replay (grader/replay/run.py): what does the notebook compute when autograd cannot run
("block"), and, where the student's code reached for autograd, what does it compute when it
can ("watch")? A gradient that is right only in the second is autograd's, not the student's.

What "cannot run" rests on, from the easiest to undo to the hardest:
- the documented entry points (torch.autograd.grad and backward, Tensor.backward,
  torch.func / functorch, torch.autograd.functional, forward_ad, TorchScript and compile, grad
  mode switched on) are replaced by functions that say so and raise AutogradUnavailable;
- a profile hook sees every call to a C function, however it was reached (an alias, importlib,
  a reloaded module, a reference kept inside torch, exec of a decoded string): one of the
  engine's own entry points called, or grad mode found on, means the replacements were worked
  around. In a blocked run that stops the run at once: nothing it computes from then on counts;
- an audit hook, which no Python code can remove, refuses what could remove the profile hook
  or reach under it: sys.setprofile / settrace (cProfile too), ctypes, the garbage collector's
  object lists, /proc (the process's own memory);
- no thread or process can start (refused by the audit hook, and RLIMIT_NPROC 0 for the
  sandbox's user): all the run's work happens on the one thread the hook watches. The guard is
  installed before the run's first cell, so a cell added above the answers is watched too.
"""

from __future__ import annotations

import _thread
import importlib
import os
import resource
import sys
import threading

import torch

BLOCK, WATCH = "block", "watch"
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
# Audited events a blocked run refuses; "stop" ones are never honest and end the run.
REFUSED = {
    "sys.setprofile": "stop",
    "sys.settrace": "stop",
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
    """One run's guard. `events` is what the run's record reports (record.py's AutogradEvent);
    `where` is the statement running (the runner sets it)."""

    def __init__(self, mode: str, on_stop):
        self.mode, self.on_stop = mode, on_stop
        self.events: list[dict] = []
        self.where: tuple[str, int | None] = ("", None)
        self._seen: set = set()

    def note(self, kind: str, what: str) -> None:
        key = (kind, what, self.where)
        if key in self._seen or len(self.events) >= MAX_EVENTS:
            return
        self._seen.add(key)
        self.events.append({"kind": kind, "what": what, "cell": self.where[0], "line": self.where[1]})

    def refuse(self, what: str, *, autograd: bool = True):
        self.note("call" if autograd else "refused", what)
        why = ": a gradient must be your own formula (autograd only checks your work)" if autograd else ""
        raise AutogradUnavailable(f"{what} is not available when the autograder replays your notebook{why}")

    def stop(self, kind: str, what: str) -> None:
        """A blocked run that worked around the guard ends here; what it had sent stays."""
        if self.mode == BLOCK:
            self.note(kind, what)
            self.on_stop(self)
        else:  # autograd is allowed here: this is only where it was used
            self.note("call", what)


def install(mode: str, on_stop) -> Guard:
    """Called once in the run's own process, before the student's first answer cell.
    `on_stop(guard)` must end the process (the runner sends its last checkpoint, then exits)."""
    guard = Guard(mode, on_stop)
    torch._C._set_grad_enabled(False)  # as the replay server left it: no graph is recorded
    if mode == BLOCK:
        _replace_entry_points(guard)
        resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))
    sys.setprofile(_profile_hook(guard))
    if mode == BLOCK:
        sys.addaudithook(_audit_hook(guard))
        sys.getprofile = lambda: None  # the hook is reachable from nowhere else
    return guard


def _profile_hook(guard: Guard):
    grad_on, names = torch._C.is_grad_enabled, ENGINE

    def hook(frame, event, arg):
        if event == "c_call":
            what = names.get(getattr(arg, "__name__", None))
            if what:
                guard.stop("bypass", what)
        if grad_on():
            guard.stop("bypass", "grad mode switched on")

    return hook


def _audit_hook(guard: Guard):
    refused, realpath = REFUSED, os.path.realpath

    def hook(event, args):
        how = refused.get(event)
        if how is None and event == "open" and isinstance(args[0], (str, bytes)):
            path = os.fsdecode(args[0])
            how = "refuse" if realpath(path).startswith("/proc") else None
        if how == "stop":
            guard.stop("tamper", event)
        if how:
            guard.note("refused", event)
            raise AutogradUnavailable(f"{event} is not available when the autograder replays your notebook")

    return hook


def preload() -> None:
    """The modules whose entry points a blocked run replaces: imported once, by the warm server."""
    for module_name in ENTRY_POINTS:
        importlib.import_module(module_name)


def _replace_entry_points(guard: Guard) -> None:
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
