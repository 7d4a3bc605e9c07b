"""The replay server: the process tree around the untrusted runs (runner.py runs the cells).
`python -I -m grader.untrusted.server` is started by the judge (grader/replay/client.py) inside
the sandbox. It never runs a student's code itself: each run is a fork, isolated in namespaces of
its own (isolation.py), whose result comes back on a pipe of its own, bounded, and is relayed to
the judge with the request's nonce."""

from __future__ import annotations

import gc
import io
import json
import os
import select
import signal
import struct
import sys
import time
from pathlib import Path

import torch

from . import autograd_guard, derivative_block, isolation, kit_view, preload
from .isolation import real_exit
from .protocol import (
    AS_SUBMITTED,
    BLOCK,
    GUARD_MODES,
    INJECT_FILE,
    INPUTS_FILE,
    MAX_FRAME_BYTES,
    META_HEADER,
    PLAN_FILE,
    STATUS_OK,
    AnswerHeader,
    ReplayPlan,
    RunInputs,
    RunRecord,
    RunRequest,
    ServerHello,
    timed_out,
)
from .runner import NoIPython, Runner

FRAME_HEADER = struct.Struct(">Q")  # a run's pipe to the server: size, then the frame
MAX_RUN_BYTES = 4 * MAX_FRAME_BYTES  # all a run may send (checkpoints included)
CPU = struct.Struct(">d")
# what a run imports from: the Python installation and the kit (the sandbox binds them where they
# are, under /tmp too; a run's fresh /tmp shows these again and nothing else)
_INSTALLATION = (sys.prefix, sys.base_prefix, str(Path(__file__).resolve().parents[1]))
_RUNNER_PID: int | None = None  # the run's own process: a process the student forks sends nothing


def encode_frame(record: RunRecord, tensors: dict[str, torch.Tensor]) -> bytes:
    """One result (protocol.py's frame): the record as JSON, then the tensors as torch.save
    writes them."""
    blob = io.BytesIO()
    torch.save(tensors, blob)
    meta_json = json.dumps(record, default=str).encode()
    return META_HEADER.pack(len(meta_json)) + meta_json + blob.getvalue()


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
    frame = encode_frame(record, tensors)
    data = memoryview(FRAME_HEADER.pack(len(frame)) + frame)
    while data:
        data = data[os.write(channel, data) :]


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
) -> None:
    """One run of one submission, in this (freshly forked, isolated) process: the setup cells
    from where the warm server left off, then the run, autograd blocked or watched
    (autograd_guard.py). Results go to `channel`."""
    runner = Runner(plan, inputs, checkpoint=lambda record, tensors: _write(channel, record, tensors))
    runner.statement_seconds = statement_seconds or runner.statement_seconds
    signal.signal(signal.SIGALRM, runner.on_alarm)  # before the guard: then no handler may be set
    t0 = time.perf_counter()
    # before the first cell of the run: a cell the student added above the answers is blocked too
    runner.guard = autograd_guard.install(autograd)
    prefix = warm[0] if warm else []
    if warm and plan["cells"][: len(prefix)] == prefix:
        ns = runner.setup(dict(warm[1]), start=len(prefix))
    else:
        ns = runner.setup({"__name__": "__main__", "get_ipython": NoIPython})
    record, tensors = runner.run(ns, run)
    record["errors"] = runner.errors
    record["autograd"] = runner.guard.events if runner.guard else []
    record["cpu"] = runner.cpu
    record["seconds"] = time.perf_counter() - t0
    _write(channel, record, tensors)


def _run_child(req: RunRequest, warm, channel: int, pid_pipe: int) -> int:
    """The forked child: new namespaces, then the run itself as PID 1 of them. Returns the
    run's exit status for the server (128 + signal when it was killed)."""
    os.setpgid(0, 0)
    isolation.close_other_fds({channel, pid_pipe})  # the server's pipes stay the server's
    try:
        isolation.new_namespaces()
        isolated = True
    except OSError:
        isolated = False  # said in the status; the process group is all that is left
    run_pid = os.fork()
    if run_pid == 0:
        code = 0
        try:
            plan, inputs = read_run_inputs(Path(req["workdir"]), req["run"])
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
            isolation.close_other_fds({channel})
            sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - for the run's lifetime
            global _RUNNER_PID
            _RUNNER_PID = os.getpid()
            os.register_at_fork(after_in_child=_forked_by_the_student)
            os._exit = _student_exit
            mode = req["autograd"] if req.get("autograd") in GUARD_MODES else BLOCK
            seconds = req.get("statement_seconds")
            seconds = float(seconds) if type(seconds) in (int, float) and 0 < seconds < 3600 else None
            replay_run(plan, inputs, req["run"], channel, warm, mode, seconds)
        except BaseException:  # noqa: BLE001
            code = 1
        finally:
            real_exit(code)
    os.close(channel)
    os.write(pid_pipe, struct.pack(">iB", run_pid, isolated))
    _, status, usage = os.wait4(run_pid, 0)
    # the kernel's count of the run's CPU time: nothing in the run can change it
    os.write(pid_pipe, CPU.pack(usage.ru_utime))  # user time, as the run counts its cells
    os.close(pid_pipe)
    return 128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def _one_run(req: RunRequest, warm) -> tuple[str, bytes | None, float | None]:
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
            code = _run_child(req, warm, results_w, pid_w)
        finally:
            real_exit(code)
    os.close(results_w)
    os.close(pid_w)
    info = os.read(pid_r, 5)
    run_pid, isolated = struct.unpack(">iB", info) if len(info) == 5 else (None, 0)
    status, frame = _collect(pid, results_r, float(req["timeout"]))
    cpu = _run_cpu(pid_r)
    os.close(pid_r)
    for victim in (run_pid, pid):
        if victim:
            _kill(victim)
    _kill(-pid)
    os.close(results_r)
    if not isolated:
        status += " (not isolated: no user namespaces here)"
    return status, frame, cpu


def _run_cpu(pid_r: int) -> float | None:
    """The run's CPU seconds, once its process has ended (None if it is still running)."""
    ready, _, _ = select.select([pid_r], [], [], 0.2)
    data = os.read(pid_r, CPU.size) if ready else b""
    return CPU.unpack(data)[0] if len(data) == CPU.size else None


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _collect(pid: int, results: int, timeout: float) -> tuple[str, bytes | None]:
    """Read frames until the run's child has exited and its pipe is closed, or the time is up.
    Keeps the last complete frame; a run that sends too much is stopped."""
    deadline = time.monotonic() + timeout
    buf, last, total, status, eof = bytearray(), None, 0, None, False
    while True:
        if status is None:
            done, raw = os.waitpid(pid, os.WNOHANG)
            if done:
                code = os.WEXITSTATUS(raw) if os.WIFEXITED(raw) else 128 + os.WTERMSIG(raw)
                status = _status(code)
                deadline = min(deadline, time.monotonic() + 2.0)  # the pipe closes with the namespace
        if status is not None and eof:
            return status, last
        if time.monotonic() > deadline:
            return status or timed_out(timeout), last
        ready, _, _ = select.select([results], [], [], 0.01)
        if ready and not eof:
            chunk = os.read(results, 1 << 20)
            eof = not chunk
            total += len(chunk)
            if total > MAX_RUN_BYTES:
                return f"stopped: the run sent more than {MAX_RUN_BYTES} bytes", last
            buf += chunk
            last, buf = _frames(buf, last)
            if last is _TOO_BIG:
                return f"stopped: a result over {MAX_FRAME_BYTES} bytes", None


_TOO_BIG = b""


def _status(code: int) -> str:
    return STATUS_OK if code == 0 else (f"killed by signal {code - 128}" if code > 128 else f"exit {code}")


def _frames(buf: bytearray, last):
    while len(buf) >= FRAME_HEADER.size:
        (size,) = FRAME_HEADER.unpack_from(buf)
        if size > MAX_FRAME_BYTES:
            return _TOO_BIG, buf
        if len(buf) < FRAME_HEADER.size + size:
            break
        last = bytes(buf[FRAME_HEADER.size : FRAME_HEADER.size + size])
        del buf[: FRAME_HEADER.size + size]
    return last, buf


def serve() -> int:
    """A warm replay server that runs no student code itself: torch imported and the shared
    setup cells run once, then each request forks an isolated child for one run of one
    submission, one run at a time (no run sees data meant for a later one).
    Protocol (protocol.py), on stdin a JSON object a line: a ServerHello {"prefix", "data_dir"},
    then RunRequests {"workdir", "run", "timeout", "nonce", ...}. On the original stdout
    {"ready": true, "errors"} once, then for each request an AnswerHeader line {"nonce",
    "status", "size", "cpu"} and `size` bytes, the run's last result frame (encode_frame).
    No run can write here: it holds none of these pipes."""
    isolation.not_dumpable()
    proto = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)  # anything printed by the setup cells goes to stderr
    sys.stdout = sys.stderr
    torch.set_num_threads(1)  # fork-safe, and one core per replay
    torch.set_grad_enabled(False)  # no autograd to copy answers from
    preload.preload()  # what each run's guard replaces, imported once
    kit_view.install()  # the kit as the sandbox shows it, where there is no sandbox too
    hello: ServerHello = json.loads(sys.stdin.readline())
    os.chdir(hello["data_dir"])
    runner = Runner({"cells": hello["prefix"], "first_answer": len(hello["prefix"])}, {})
    ns0 = runner.setup({"__name__": "__main__", "get_ipython": NoIPython})
    warm = (hello["prefix"], ns0)
    derivative_block.install()  # torch's derivative code off for every run forked from here
    gc.freeze()  # never collected in a run: no collector's pause in a student's cell, no copy-on-write
    proto.write((json.dumps({"ready": True, "errors": runner.errors}) + "\n").encode())
    for line in sys.stdin:
        req: RunRequest = json.loads(line)
        status, frame, cpu = _one_run(req, warm)
        frame = frame or b""
        header: AnswerHeader = {"nonce": req.get("nonce"), "status": status, "size": len(frame), "cpu": cpu}
        proto.write((json.dumps(header) + "\n").encode() + frame)
    return 0


if __name__ == "__main__":
    sys.exit(serve())
