"""One run's processes, in the sandbox: the server's child that makes the run's namespaces and
waits for it (counting its CPU), the run's own process (PID 1 of them) that loads its plan and
inputs, leaves the exchange folder for a fresh /tmp and runs, and what a run is in its own
process: the guard, the setup cells, the run, its record sent as frames on its own pipe. The
server (server.py) asks for one run at a time; a run group (run_group.py) uses the same parts."""

from __future__ import annotations

import json
import os
import select
import signal
import struct
import sys
import time
from pathlib import Path

import torch

from . import autograd_guard, isolation
from .frames import collect, kill, send_frame
from .isolation import real_exit
from .protocol import (
    AS_SUBMITTED,
    BLOCK,
    GUARD_MODES,
    INJECT_FILE,
    INPUTS_FILE,
    PLAN_FILE,
    ReplayPlan,
    RunInputs,
    RunRecord,
    RunRequest,
)
from .runner import NoIPython, Runner

CPU = struct.Struct(">d")
# what a run imports from: the Python installation and the kit (the sandbox binds them where they
# are, under /tmp too; a run's fresh /tmp shows these again and nothing else)
_INSTALLATION = (sys.prefix, sys.base_prefix, str(Path(__file__).resolve().parents[1]))
_RUNNER_PID: int | None = None  # the run's own process: a process the student forks sends nothing
NOT_ISOLATED = " (not isolated: no user namespaces here)"


def _student_exit(code=0):
    """A run's os._exit: it ends only the statement that called it."""
    raise SystemExit(f"os._exit({code}) called")


def _forked_by_the_student() -> None:
    # in a child of the student's os.fork(): os._exit ends it, as anywhere else
    os._exit = real_exit


def _write(channel: int, record: RunRecord, tensors: dict) -> None:
    """Send a result (a checkpoint or the last word) on the run's own pipe to the server.
    Only from the run's own process: a child the student forked would interleave its frames."""
    if os.getpid() != _RUNNER_PID:
        return
    send_frame(channel, record, tensors)


def read_run_inputs(work: Path, run: str) -> tuple[ReplayPlan, RunInputs]:
    """The plan and the inputs of one run. WORK/inject.pt holds exactly the correct values this run
    is handed; exercise 4's inputs and the training set (6 MB), only the notebook's own run reads."""
    plan, inputs = json.loads((work / PLAN_FILE).read_text()), {"ex4": {}, "train": {}}
    if run == AS_SUBMITTED:
        inputs = torch.load(work / INPUTS_FILE, weights_only=True)
    inputs["inject"] = torch.load(work / INJECT_FILE, weights_only=True)
    return plan, inputs


def replay_run(
    plan: ReplayPlan,
    inputs: RunInputs,
    run: str,
    channel: int,
    warm: tuple[list, dict] | None = None,
    autograd: str = BLOCK,
    statement_seconds: float | None = None,
    trains: bool = True,
) -> None:
    """One run of one submission, in this (freshly forked, isolated) process: the setup cells
    from where the warm server left off, then the run, autograd blocked or watched
    (autograd_guard.py), exercise 4's training loop where `trains`. Results go to `channel`."""
    ns, start = warm_start(plan, warm)
    runner = Runner(plan, inputs)
    runner.trains = trains
    run_guarded(runner, ns, run, channel, autograd, statement_seconds, setup_from=start)


def warm_start(plan: ReplayPlan, warm: tuple[list, dict] | None) -> tuple[dict, int]:
    """Where a run's setup starts: a copy of the warm server's namespace after its prefix, where
    the plan begins with that prefix; else an empty one, from the first cell."""
    prefix = warm[0] if warm else []
    if warm and plan["cells"][: len(prefix)] == prefix:
        return dict(warm[1]), len(prefix)
    return {"__name__": "__main__", "get_ipython": NoIPython}, 0


def run_guarded(
    runner: Runner,
    ns: dict,
    run: str,
    channel: int,
    autograd: str = BLOCK,
    statement_seconds: float | None = None,
    setup_from: int | None = None,
    prepared: autograd_guard.Guard | None = None,
) -> None:
    """The guard, the setup cells from `setup_from` (None: set up already, by a run group), the
    run; its record to `channel`. `prepared`: a blocked run's guard prepared before the fork,
    the alarm handler set with it (a run group's); the run confines itself."""
    runner.checkpoint = lambda record, tensors: _write(channel, record, tensors)
    runner.statement_seconds = statement_seconds or runner.statement_seconds
    t0 = time.perf_counter()
    # before the first cell of the run: a cell the student added above the answers is blocked too
    if prepared is None:
        signal.signal(signal.SIGALRM, runner.on_alarm)  # before the guard: then no handler may be set
        runner.guard = autograd_guard.install(autograd)
    else:
        runner.guard = autograd_guard.confine(prepared)
    if setup_from is not None:
        ns = runner.setup(ns, start=setup_from)
    record, tensors = runner.run(ns, run)
    record["errors"] = runner.errors
    record["autograd"] = runner.guard.events if runner.guard else []
    record["cpu"] = runner.cpu
    record["seconds"] = time.perf_counter() - t0
    _write(channel, record, tensors)


def become_the_run(channel: int) -> None:
    """In the run's own process, before any of its cells: only `channel` left open, and the
    exits and forks of a run (a fork the student makes sends nothing)."""
    isolation.close_other_fds({channel})
    global _RUNNER_PID
    _RUNNER_PID = os.getpid()
    os.register_at_fork(after_in_child=_forked_by_the_student)
    os._exit = _student_exit


def request_mode(req: RunRequest) -> str:
    return req["autograd"] if req.get("autograd") in GUARD_MODES else BLOCK


def request_trains(req: RunRequest) -> bool:
    return req.get("train") is not False


def request_seconds(req: RunRequest) -> float | None:
    seconds = req.get("statement_seconds")
    return float(seconds) if type(seconds) in (int, float) and 0 < seconds < 3600 else None


def isolated_child(req: RunRequest, keep: set[int], pid_pipe: int, load, body) -> int:
    """The forked child: new namespaces, then PID 1 of them, which loads what it needs from the
    request's folder (`load(workdir)` -> (plan, loaded)), leaves it for a fresh /tmp and runs
    `body(plan, loaded)`, with only the fds in `keep`. Returns PID 1's exit status for the server
    (128 + signal when it was killed); its CPU seconds go on `pid_pipe`."""
    os.setpgid(0, 0)
    isolation.close_other_fds(keep | {pid_pipe})  # the server's pipes stay the server's
    try:
        isolation.new_namespaces()
        isolated = True
    except OSError:
        isolated = False  # said in the status; the process group is all that is left
    run_pid = os.fork()
    if run_pid == 0:
        code = 0
        try:
            plan, loaded = load(Path(req["workdir"]))
            # the trusted names.txt; it stays reachable as the current folder under the new /tmp
            os.chdir(plan["data_dir"])
            if isolated:  # a kit or virtualenv kept under /tmp stays importable (sympy, torch._dynamo
                # are imported on first use), the exchange folder does not come back
                isolation.private_scratch(
                    int(plan["run_tmp_mb"]),
                    noexec=True,
                    keep_mounts=os.path.isdir("/tmp"),
                    only=_INSTALLATION,
                )
            isolation.close_other_fds(keep)
            sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - for the run's lifetime
            code = body(plan, loaded) or 0
        except BaseException:  # noqa: BLE001
            code = 1
        finally:
            real_exit(code)
    for fd in keep:
        os.close(fd)
    os.write(pid_pipe, struct.pack(">iB", run_pid, isolated))
    _, status, usage = os.wait4(run_pid, 0)
    # the kernel's count of the run's CPU time: nothing in the run can change it
    os.write(pid_pipe, CPU.pack(usage.ru_utime))  # user time, as the run counts its cells
    os.close(pid_pipe)
    return 128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def one_run(req: RunRequest, warm) -> tuple[str, bytes | None, float | None]:
    """Fork, let the child run, read what it sends (bounded), and make sure nothing of it
    is left: killing the run's PID 1 ends its whole namespace."""
    results_r, results_w = os.pipe()
    pid_r, pid_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(results_r)
            os.close(pid_r)

            def body(plan, inputs):
                become_the_run(results_w)
                mode, seconds = request_mode(req), request_seconds(req)
                replay_run(plan, inputs, req["run"], results_w, warm, mode, seconds, request_trains(req))

            load = lambda work: read_run_inputs(work, req["run"])  # noqa: E731
            code = isolated_child(req, {results_w}, pid_w, load, body)
        finally:
            real_exit(code)
    os.close(results_w)
    os.close(pid_w)
    info = os.read(pid_r, 5)
    run_pid, isolated = struct.unpack(">iB", info) if len(info) == 5 else (None, 0)
    status, frame = collect(pid, results_r, float(req["timeout"]))
    cpu = _run_cpu(pid_r)
    os.close(pid_r)
    for victim in (run_pid, pid):
        if victim:
            kill(victim)
    kill(-pid)
    os.close(results_r)
    if not isolated:
        status += NOT_ISOLATED
    return status, frame, cpu


def _run_cpu(pid_r: int) -> float | None:
    """The run's CPU seconds, once its process has ended (None if it is still running)."""
    ready, _, _ = select.select([pid_r], [], [], 0.2)
    data = os.read(pid_r, CPU.size) if ready else b""
    return CPU.unpack(data)[0] if len(data) == CPU.size else None
