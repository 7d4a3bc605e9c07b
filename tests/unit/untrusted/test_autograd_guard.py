"""grader/untrusted/autograd_guard.py in a forked child per test (a blocked run's state cannot be
taken back: an audit hook and the sealed dispatcher stay for the process's life), set up as the
warm server sets a run up (derivative_block.install, then the guard): what a blocked run refuses,
that no route around the entry points yields a derivative, and that nothing a student can reach
from a frame, a closure or a signal handler turns autograd back on."""

from __future__ import annotations

import json
import os
import select
import signal
import time

import pytest
import torch

from grader.untrusted import autograd_guard as ag
from grader.untrusted import derivative_block, preload

pytestmark = pytest.mark.integration  # starts processes: make integration


def in_child(mode: str, body, install=ag.install) -> dict:
    """Run body(guard) in a fork set up as a replay run is; return what it reported."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        code = 0
        try:
            derivative_block.install()
            preload.preload()
            guard = install(mode)
            if guard:
                guard.where = ("cell", 3)
            out = body(guard)
            if guard:
                guard.check()
            os.write(w, json.dumps({"out": out, "events": guard.events if guard else []}).encode())
        except BaseException as e:  # noqa: BLE001 - reported to the parent
            os.write(w, json.dumps({"crash": repr(e)}).encode())
            code = 1
        finally:
            os._exit(code)
    os.close(w)
    data, deadline = b"", time.monotonic() + 120
    while select.select([r], [], [], max(0.0, deadline - time.monotonic()))[0]:
        chunk = os.read(r, 1 << 16)
        if not chunk:
            break
        data += chunk
    os.close(r)
    if time.monotonic() >= deadline:
        os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    assert data, "the child said nothing in 120 s"
    result = json.loads(data)
    assert "crash" not in result, result
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


def _gradient(fn) -> list | str:
    """What a route to autograd yields for d/dw sum(w * [0, 1, 2]) at w = 1: never [0, 1, 2]."""
    try:
        g = fn()
    except Exception as e:  # noqa: BLE001 - an error is one way of yielding nothing
        return type(e).__name__
    return g.tolist() if isinstance(g, torch.Tensor) else repr(g)


def prepared_then_forked(mode: str):
    """A run group's way (run_group.py): the guard prepared in the group, which then forks the
    run; the run confines itself. The group waits for its run and ends as it did."""
    guard = ag.prepare()
    pid = os.fork()
    if pid:
        _, status = os.waitpid(pid, 0)
        os._exit(os.waitstatus_to_exitcode(status))
    return ag.confine(guard)


# a run alone installs the whole guard in its own process; a run group's run finds it prepared
INSTALLS = pytest.mark.parametrize("install", [ag.install, prepared_then_forked], ids=["alone", "in a group"])


@INSTALLS
def test_a_blocked_run_refuses_every_entry_point_and_says_why(install):
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
            "engine": _refused(
                lambda: torch.autograd.variable.Variable._execution_engine.run_backward((loss,), (None,))
            ),
            "tanh_backward": _refused(lambda: torch.ops.aten.tanh_backward(w, w)),
        }

    result = in_child(ag.BLOCK, body, install)
    for name, said in result["out"].items():
        assert "not available when the autograder replays your notebook" in said, name
    assert {e["kind"] for e in result["events"]} == {"call"}
    assert {"torch.autograd.grad", "Tensor.backward", "torch.func.grad", "aten::tanh_backward"} <= {
        e["what"] for e in result["events"]
    }
    assert all((e["cell"], e["line"]) == ("cell", 3) for e in result["events"])


def test_honest_work_is_untouched_in_a_blocked_run():
    x = torch.randn(4, 3, generator=torch.Generator().manual_seed(0))
    expected = torch.nn.functional.cross_entropy((x @ x.T).tanh(), torch.tensor([0, 1, 2, 3])).item()

    def body(guard):
        with torch.no_grad():
            y = (x @ x.T).tanh()
        torch.set_grad_enabled(False)
        loss = torch.nn.functional.cross_entropy(y, torch.tensor([0, 1, 2, 3]))
        return {"loss": loss.item(), "grad_mode": torch.is_grad_enabled()}

    result = in_child(ag.BLOCK, body)
    assert result["out"] == {"loss": expected, "grad_mode": False} and not result["events"]


def test_no_route_around_the_entry_points_yields_a_derivative():
    """Each of these switched autograd back on under the guard of the last round, or would (grad
    mode switched on in C++ by InferenceMode(False), the engine found through
    object.__subclasses__, torch.func's own implementation, forward mode's C entry): the graph
    they need is not made at the dispatcher, so they get nothing, and the TAs see the sign."""

    def body(guard):
        import importlib

        switched_on = torch._C._InferenceMode(False)  # grad mode on, no Python switch involved
        switched_on.__enter__()
        w = torch.ones(3).requires_grad_()
        loss = (w * torch.arange(3.0)).sum()
        engine = next(c for c in object.__subclasses__() if c.__name__ == "_EngineBase")
        impl = importlib.import_module("torch._functorch.eager_transforms").grad_impl
        out = {
            "grad_fn": repr(loss.grad_fn),
            "engine": _gradient(
                lambda: engine().run_backward((loss,), (torch.ones(()),), False, False, (w,), False, False)
            ),
            "grad_impl": _gradient(
                lambda: impl(lambda x: (x * torch.arange(3.0)).sum(), (0,), False, (w.detach(),), {})
            ),
            "dual": _gradient(lambda: torch._C._enter_dual_level()),
            "inference_mode_off": _gradient(lambda: _in_inference_mode_off()),
        }
        guard.check()
        switched_on.__exit__(None, None, None)
        return out

    result = in_child(ag.BLOCK, body)
    out = result["out"]
    assert out["grad_fn"] == "None"
    for route in ("engine", "grad_impl", "inference_mode_off"):
        assert out[route] != [0.0, 1.0, 2.0] and out[route] != [[0.0, 1.0, 2.0]], (route, out[route])
    assert ("bypass", "grad mode switched on") in {(e["kind"], e["what"]) for e in result["events"]}


def _in_inference_mode_off():
    with torch.inference_mode(False):  # InferenceMode(False) switches grad mode on in C++
        w = torch.ones(3).requires_grad_()
        return torch.autograd.grad((w * torch.arange(3.0)).sum(), w)[0]


def test_no_signal_handler_can_be_set_and_one_set_anyway_reaches_nothing():
    """A handler runs wherever the signal lands, so none may be set (reloading _signal brings
    nothing back); and were one set, nothing of the guard is in a Python frame to edit: a
    handler that edits every closure it can reach still leaves no graph to make."""

    def body(guard):
        import _signal
        import importlib
        import signal

        out = {
            name: _refused(fn)
            for name, fn in {
                "signal": lambda: signal.signal(signal.SIGPROF, print),
                "setitimer": lambda: signal.setitimer(signal.ITIMER_PROF, 0.001),
                "_signal": lambda: _signal.signal(signal.SIGPROF, print),
                "wakeup": lambda: signal.set_wakeup_fd(-1),
            }.items()
        }
        seen = []

        def handler(signum, frame):  # what issue 16's attacker did: edit the frames it lands in
            while frame is not None:
                seen.append(frame.f_code.co_name)
                for value in list(frame.f_locals.values()):
                    for cell in getattr(value, "__closure__", None) or ():
                        try:
                            if callable(cell.cell_contents):
                                cell.cell_contents = lambda *a, **k: None
                        except Exception:  # noqa: BLE001
                            pass
                frame = frame.f_back

        out["reloaded"] = _refused(lambda: importlib.reload(_signal).signal(signal.SIGPROF, handler))
        frame = __import__("sys")._getframe()
        handler(signal.SIGPROF, frame)  # as if it had landed here: every closure it reaches edited
        torch._C._InferenceMode(False).__enter__()
        w = torch.ones(3).requires_grad_()
        out["after"] = _gradient(lambda: _engine_gradient(w))
        out["handler ran"] = bool(seen)
        return out

    result = in_child(ag.BLOCK, body)
    out = result["out"]
    for name in ("signal", "setitimer", "_signal", "wakeup", "reloaded"):
        assert "not available" in out[name], (name, out)
    assert out["handler ran"] and out["after"] != [0.0, 1.0, 2.0], out
    assert {("tamper", "signal.signal"), ("tamper", "signal.setitimer")} <= {
        (e["kind"], e["what"]) for e in result["events"]
    }


def _reimported_ctypes():
    import importlib
    import sys

    sys.modules.pop("_ctypes", None)
    return importlib.import_module("_ctypes")._memmove_addr


def _engine_gradient(w):
    engine = next(c for c in object.__subclasses__() if c.__name__ == "_EngineBase")
    loss = (w * torch.arange(3.0)).sum()
    return engine().run_backward((loss,), (torch.ones(()),), False, False, (w,), False, False)[0]


@INSTALLS
def test_a_blocked_run_cannot_reach_under_the_dispatcher(install):
    def body(guard):
        import ctypes
        import gc
        import threading

        out = {}
        for name, fn in {
            "thread": lambda: threading.Thread(target=print).start(),
            "fork": os.fork,
            "ctypes": lambda: ctypes.CDLL(None),
            "pythonapi": lambda: ctypes.pythonapi.Py_IncRef(ctypes.py_object(1)),
            "memmove": lambda: ctypes.memmove(id(out), id(out), 1),  # no audit event of its own
            "cast": lambda: ctypes.cast(id(out), ctypes.py_object),
            "_ctypes again": lambda: _reimported_ctypes(),
            "gc": gc.get_objects,
            "proc": lambda: open("/proc/self/mem", "rb"),  # noqa: SIM115 - refused before it opens
        }.items():
            try:
                fn()
                out[name] = "allowed"
            except (ag.AutogradUnavailable, AttributeError) as e:  # refused, or not there at all
                out[name] = f"{type(e).__name__}: {e}"
        return out

    result = in_child(ag.BLOCK, body, install)
    assert "allowed" not in result["out"].values(), result["out"]
    assert "ctypes" in result["out"]["memmove"]
    assert "loading an extension module" in result["out"]["_ctypes again"]
    kinds = {(e["kind"], e["what"]) for e in result["events"]}
    assert {
        ("tamper", "loading an extension module"),
        ("tamper", "gc.get_objects"),
        ("refused", "os.fork"),
    } <= kinds
    assert ("refused", "a thread (the replay runs on one)") in kinds


def test_torchs_derivative_source_cannot_be_opened_by_any_name():
    """Loading torch._decomp again from its source would bring its functions back: the file is
    refused by what it is (a symlink to it too), and so is a folder (a path relative to an
    open folder would name the file without the hook seeing it)."""
    source = derivative_block.derivative_files()[0]

    def body(guard):
        import importlib

        link = "/tmp/innocent.py"
        if os.path.lexists(link):
            os.unlink(link)
        os.symlink(source, link)

        class Sneaky(str):
            def startswith(self, *a):
                return False

        return {
            "direct": _refused(lambda: open(source).read()),  # noqa: SIM115
            "symlink": _refused(lambda: open(link).read()),  # noqa: SIM115
            "folder": _refused(lambda: os.open(os.path.dirname(source), os.O_RDONLY)),
            "own path type": _refused(lambda: open(Sneaky(link)).read()),  # noqa: SIM115
            "reload": _refused(
                lambda: importlib.reload(importlib.import_module("torch._decomp.decompositions"))
            ),
            "names.txt-like": str(len(open(__file__).read()) > 0),  # noqa: SIM115 - honest reads work
        }

    out = in_child(ag.BLOCK, body)["out"]
    assert out.pop("names.txt-like") == "True"
    assert all("not available" in said for said in out.values()), out


def test_the_audit_hooks_frame_holds_nothing_to_change():
    """Reached from a traceback, the hook's frame shows its variables: every one is immutable
    or a C function, so clearing or editing them changes no refusal."""

    def body(guard):
        import gc

        try:
            gc.get_objects()
        except ag.AutogradUnavailable as e:
            tb = e.__traceback__
            while tb.tb_next:
                tb = tb.tb_next
            frame_vars = tb.tb_frame.f_locals
        mutable = {
            k: type(v).__name__
            for k, v in frame_vars.items()
            if isinstance(v, (dict, list, set)) or (hasattr(v, "__dict__") and not callable(v))
        }
        for v in frame_vars.values():
            if isinstance(v, frozenset):
                try:
                    v.clear()  # frozensets have no clear
                except AttributeError:
                    pass
        return {"mutable": mutable, "again": _refused(gc.get_objects)}

    out = in_child(ag.BLOCK, body)["out"]
    assert out["mutable"] == {}, out
    assert "not available" in out["again"]


def test_watched_and_open_runs_have_torch_as_it_ships():
    def body(guard):
        w = torch.ones(3).requires_grad_()
        with torch.enable_grad():
            (g,) = torch.autograd.grad((w * torch.arange(3.0)).sum(), w)
        x = torch.full((2,), 0.5)
        return {"grad": g.tolist(), "tanh_backward": torch.ops.aten.tanh_backward(x, x).tolist()}

    for mode in (ag.WATCH, ag.OPEN):
        result = in_child(mode, body)
        assert result["out"] == {"grad": [0.0, 1.0, 2.0], "tanh_backward": [0.375, 0.375]}, mode


def test_statement_timeouts_landing_anywhere_change_nothing():
    """The last round's race: a statement's alarm landing inside a Python hook unhooked it. No
    hook holds the block now, so a thousand timeouts leave every refusal in place."""

    def body(guard):
        import gc

        from grader.untrusted.runner import Runner, StatementTimeout, _setitimer

        runner = Runner({}, {})
        import signal

        assert signal.getsignal(signal.SIGALRM).__func__ is type(runner).on_alarm
        timeouts = 0
        while timeouts < 1000:
            try:
                _setitimer(signal.ITIMER_REAL, 0.0001)
                while True:
                    _refused(gc.get_objects)  # the audit hook, over and over
            except StatementTimeout:
                timeouts += 1
        _setitimer(signal.ITIMER_REAL, 0)
        w = torch.ones(3).requires_grad_()
        torch._C._InferenceMode(False).__enter__()
        return {"timeouts": timeouts, "gc": _refused(gc.get_objects), "graph": repr((w * 2).sum().grad_fn)}

    def with_alarm(mode):
        import signal

        from grader.untrusted.runner import Runner

        signal.signal(signal.SIGALRM, Runner({}, {}).on_alarm)  # as the server does, first
        return ag.install(mode)

    result = in_child(ag.BLOCK, body, install=with_alarm)
    assert result["out"]["timeouts"] == 1000 and "not available" in result["out"]["gc"], result["out"]
    assert result["out"]["graph"] == "None"
