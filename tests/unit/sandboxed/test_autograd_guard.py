"""grader/sandboxed/autograd_guard.py in a forked child per test (the guard cannot be taken back:
an audit hook stays for the process's life): what a blocked run refuses, what stops it, and
that a watched run computes with autograd and says where."""

from __future__ import annotations

import json
import os

import pytest
import torch

from grader.sandboxed import autograd_guard as ag


def in_child(mode: str, body) -> dict:
    """Run body(guard) in a fork with the guard installed; return what it reported, or the
    events the guard's on_stop sent when it stopped the child."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        code = 0
        try:

            def stop(guard):
                os.write(w, json.dumps({"stopped": True, "events": guard.events}).encode())
                os._exit(ag.STOPPED)

            guard = ag.install(mode, stop)
            guard.where = ("cell", 3)
            out = body(guard)
            os.write(w, json.dumps({"stopped": False, "out": out, "events": guard.events}).encode())
        except BaseException as e:  # noqa: BLE001 - reported to the parent
            os.write(w, json.dumps({"crash": repr(e)}).encode())
            code = 1
        finally:
            os._exit(code)
    os.close(w)
    data = b""
    while chunk := os.read(r, 1 << 16):
        data += chunk
    os.close(r)
    _, status = os.waitpid(pid, 0)
    result = json.loads(data) if data else {"stopped": None}  # stopped before it could say so
    assert "crash" not in result, result
    result["exit"] = os.WEXITSTATUS(status)
    return result


def _loss():
    w = torch.ones(3).requires_grad_()
    return w, (w * torch.arange(3.0)).sum()


def _refused(fn) -> str:
    try:
        fn()
    except ag.AutogradUnavailable as e:
        return str(e)
    return "allowed"


def test_a_blocked_run_refuses_every_entry_point_and_says_why():
    def body(guard):
        w, loss = _loss()
        return {
            "enable_grad": _refused(lambda: torch.enable_grad().__enter__()),
            "set_grad_enabled": _refused(lambda: torch.set_grad_enabled(True)),
            "autograd.grad": _refused(lambda: torch.autograd.grad(loss, w)),
            "backward": _refused(lambda: loss.backward()),
            "func.grad": _refused(lambda: torch.func.grad(lambda x: x.sum())(w)),
            "jacfwd": _refused(lambda: torch.func.jacfwd(lambda x: x)(w)),
            "functional": _refused(lambda: torch.autograd.functional.jacobian(lambda x: x, w)),
            "forward_ad": _refused(lambda: torch.autograd.forward_ad.dual_level()),
            "hook": _refused(lambda: w.register_hook(print)),
            "script": _refused(lambda: torch.jit.script(lambda x: x)),
        }

    result = in_child(ag.BLOCK, body)
    assert not result["stopped"]
    for name, said in result["out"].items():
        assert "not available when the autograder replays your notebook" in said, name
    assert {e["kind"] for e in result["events"]} == {"call"}
    assert {"torch.autograd.grad", "Tensor.backward", "torch.func.grad"} <= {
        e["what"] for e in result["events"]
    }
    assert all((e["cell"], e["line"]) == ("cell", 3) for e in result["events"])


def test_every_reference_torch_keeps_to_a_derivative_starter_is_replaced():
    """torch's own modules import some under other names (predispatch's _enter_dual_level_impl);
    called from C, through itertools.starmap, an original would not be seen by the hook."""
    held = ag.preload()
    assert ("torch._functorch.predispatch", "_enter_dual_level_impl", "forward-mode AD") in held
    assert (
        "torch._functorch.eager_transforms",
        "_grad_increment_nesting",
        "torch.func's grad transform",
    ) in held

    def body(guard):
        import importlib
        import itertools

        out = {}
        for module, attr, _ in held:
            fn = getattr(importlib.import_module(module), attr)
            out[f"{module}.{attr}"] = _refused(lambda fn=fn: list(itertools.starmap(fn, [()])))
        return out

    result = in_child(ag.BLOCK, body)
    assert not result["stopped"] and all("not available" in v for v in result["out"].values()), result


def test_honest_work_is_untouched_in_a_blocked_run():
    def body(guard):
        with torch.no_grad():
            x = torch.randn(4, 3)
        torch.set_grad_enabled(False)
        y = (x @ x.T).tanh().sum(0)
        return {"shape": list(y.shape), "grad_mode": torch.is_grad_enabled()}

    result = in_child(ag.BLOCK, body)
    assert result["out"] == {"shape": [4], "grad_mode": False} and not result["events"]


@pytest.mark.parametrize(
    "route",
    ["wrapper_closure", "kept_reference", "engine", "dual_level", "thread", "c_chain", "edited_guard"],
)
def test_a_blocked_run_that_works_around_the_entry_points_is_stopped(route):
    """Each reaches autograd's C functions without the replaced Python names: through the
    original the kit's own grad-mode wrapper keeps, or references taken before the guard (as
    one the kit did not know of would be)."""
    switch = torch._C._set_grad_enabled
    enter = torch._C._enter_dual_level
    import _thread

    start = _thread.start_new_thread

    def body(guard):
        if route == "wrapper_closure":
            cells = torch._C._set_grad_enabled.__closure__
            next(
                c.cell_contents
                for c in cells
                if getattr(c.cell_contents, "__name__", "") == "_set_grad_enabled"
            )(True)
        elif route == "kept_reference":
            list(map(switch, [True]))  # a C-driven call: caught on the next event
            len([])
        elif route == "engine":
            engine = next(c for c in object.__subclasses__() if c.__name__ == "_EngineBase")
            engine().run_backward((torch.ones(1),), (torch.ones(1),), False, False, (), False, False)
        elif route == "dual_level":
            enter()
        elif route == "c_chain":  # grad mode on and off inside C calls: no event sees it on
            leaf = torch.ones(2).requires_grad_()
            exec(
                "list(map(switch, [True])); list(map(leaf.mul, [leaf])); list(map(switch, [False]))",
                {"switch": switch, "leaf": leaf},
            )
        elif route == "edited_guard":  # what a student can reach of the guard changes nothing
            guard.note = guard.refuse = None
            guard.events.clear()
            switch(True)
        else:
            start(print, ())
        return "not stopped"

    result = in_child(ag.BLOCK, body)
    assert result["exit"] == ag.STOPPED, result
    if route != "edited_guard":
        assert result["stopped"] and result["events"][-1]["kind"] == "bypass", result


def test_a_statement_timeout_inside_the_hook_does_not_unhook_it():
    """SIGALRM ends a statement (runner.py) wherever it lands, the hook included: raised inside
    the hook, it would make Python unhook it."""
    switch = torch._C._set_grad_enabled

    def body(guard):
        import signal
        import time

        from grader.sandboxed.runner import Runner, StatementTimeout

        signal.signal(signal.SIGALRM, Runner({}, {}).on_alarm)
        timeouts = 0
        t0 = time.monotonic()
        while time.monotonic() - t0 < 1.0:
            try:  # one timer at a time, and none left outside the try
                signal.setitimer(signal.ITIMER_REAL, 0.0005)
                for _ in range(1000):
                    len([])  # a C call: an event for the hook, many times over
                signal.setitimer(signal.ITIMER_REAL, 0)
            except StatementTimeout:
                timeouts += 1
        assert timeouts > 10, timeouts
        switch(True)
        return f"not stopped after {timeouts} timeouts"

    result = in_child(ag.BLOCK, body)
    # stopped by the bypass at the end, not by Python unhooking a hook that raised (which the
    # audit hook would take for tampering: an honest slow statement must not end a run)
    assert result["exit"] == ag.STOPPED and result["stopped"], result
    assert result["events"][-1]["kind"] == "bypass" and "tamper" not in str(result["events"]), result


def test_a_blocked_run_cannot_unhook_the_guard_or_reach_under_it():
    switch = torch._C._set_grad_enabled

    def body(guard):
        import ctypes
        import gc
        import threading

        out = {}
        for name, fn in {
            "thread": lambda: threading.Thread(target=print).start(),
            "fork": os.fork,
            "ctypes": lambda: ctypes.CDLL(None),
            "gc": gc.get_objects,
            "proc": lambda: open("/proc/self/mem", "rb"),  # noqa: SIM115 - refused before it opens
        }.items():
            try:
                out[name] = str(fn())
            except ag.AutogradUnavailable as e:
                out[name] = str(e)
        import sys

        for name, fn in {
            "setprofile": lambda: sys.setprofile(None),
            "settrace": lambda: sys.settrace(print),
        }.items():
            try:
                out[name] = str(fn())
            except ag.AutogradUnavailable as e:
                out[name] = str(e)

        switch(True)  # still watched: stopped
        return out

    result = in_child(ag.BLOCK, body)
    assert result["stopped"]
    kinds = [(e["kind"], e["what"]) for e in result["events"]]
    assert ("refused", "ctypes.dlopen") in kinds and ("refused", "gc.get_objects") in kinds
    assert (
        ("refused", "open") in kinds
        and ("tamper", "sys.setprofile") in kinds
        and ("tamper", "sys.settrace") in kinds
    )
    assert kinds[-1] == ("bypass", "grad mode switched on")
    assert ("refused", "a thread (the replay runs on one)") in kinds and ("refused", "os.fork") in kinds


def test_a_watched_run_computes_with_autograd_and_says_where():
    def body(guard):
        w, _ = _loss()
        with torch.enable_grad():
            _, loss = _loss()
        guard.where = ("cell", 9)
        with torch.enable_grad():
            w = torch.ones(3).requires_grad_()
            (g,) = torch.autograd.grad((w * torch.arange(3.0)).sum(), w)
        return g.tolist()

    result = in_child(ag.WATCH, body)
    assert result["out"] == [0.0, 1.0, 2.0] and not result["stopped"]
    assert {e["kind"] for e in result["events"]} == {"call"}
    assert {"grad mode switched on", "the autograd engine"} <= {e["what"] for e in result["events"]}
    assert {e["line"] for e in result["events"] if e["what"] == "the autograd engine"} == {9}
