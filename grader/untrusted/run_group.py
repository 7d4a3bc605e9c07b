"""A submission's later runs in one isolated process, the run group. The judge's runs after the
notebook as submitted (each failed gradient's own rule, an in-one-go exercise) differ only in the
correct values each is handed. Alone, each one was forked from the server with namespaces, a
fresh /tmp, the guard and the seeded cells of its own: about 75 ms of CPU a run, two thirds of it
the kernel's (forks, mounts, page copies), for 5 to 10 ms of the student's cells.

A group does that work once per submission. Its process, PID 1 of namespaces of its own as a
run's is, runs the plan's seeded setup cells, then forks one child per run from that state. Each
child installs the guard, loads the correct values it is handed, runs, and sends its frames; the
group reads them (bounded), counts the child's CPU (wait4) and relays both to the run_process.

- The group runs no student code: a plan with a cell of the student's before the first answer is
  not grouped (the group declines; its runs go alone). So its CPU counts can be trusted as a
  lone run's are.
- It never holds a later run's values: the server reads each run's inject file and passes it
  down when that run starts, so no run can find another's in its memory.
- Blocked runs only (the default policy): a blocked run cannot fork (no process outlives it),
  and the derivative code stays off in the group as in the run_process. The guard is prepared
  in the group once, after its setup (autograd_guard.prepare: no code of the student's has run
  there, and every run starts with it in place); each run then confines itself (no process of
  its own, the audit hook) before its first cell.
- Anything off (a run over its time, a group that ends) and the server ends the whole group:
  the next run starts a new one."""

from __future__ import annotations

import io
import json
import os
import select
import signal
import struct
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from . import autograd_guard, run_process
from .frames import MAX_RUN_BYTES, TOO_BIG, kill, last_frame, status_of, write_all
from .isolation import real_exit
from .protocol import AS_SUBMITTED, BLOCK, INJECT_FILE, MAX_FRAME_BYTES, PLAN_FILE, RunRequest, timed_out
from .runner import Runner

# server -> group: the run's name size, its statement seconds, its inject size
COMMAND = struct.Struct(">HdI")
ANSWER = struct.Struct(">idQ")  # group -> server: the run's exit status, its CPU seconds, its bytes
READY = b"R"  # the group has set up and waits for runs
DECLINED = 3  # the group's exit status for a plan it does not take
SENT_TOO_MUCH = -1  # an exit status: the run sent more than MAX_RUN_BYTES and was stopped
START_SECONDS = 30.0


def groupable(req: RunRequest) -> bool:
    """A run a group may take: any but the notebook as submitted, blocked."""
    blocked = run_process.request_mode(req) == BLOCK
    return bool(req.get("group")) and req.get("run") != AS_SUBMITTED and blocked


# ------------------------------------------------------------ in the group (the sandbox's PID 1)
def group_body(plan: dict, warm: tuple[list, dict], commands: int, answers: int) -> int:
    """The group's life: set up once, then one forked child per command, until the server
    closes `commands`."""
    if any(cell["kind"] != "locked" for cell in plan["cells"][: plan["first_answer"]]):
        return DECLINED  # a cell of the student's would run in the group itself
    runner = Runner(plan, {"ex4": {}, "train": {}, "inject": {}})
    ns = runner.setup(*run_process.warm_start(plan, warm))
    signal.signal(signal.SIGALRM, runner.on_alarm)  # each run's, set before the guard
    guard = autograd_guard.prepare()  # once for every run; each confines itself
    write_all(answers, READY)
    while (command := _read_command(commands)) is not None:
        code, cpu, data = _one_child(runner, ns, guard, *command)
        write_all(answers, ANSWER.pack(code, cpu, len(data)) + data)
    return 0


def _one_child(runner: Runner, ns: dict, guard, run: str, seconds: float | None, inject: bytes):
    results_r, results_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.close(results_r)
            run_process.become_the_run(results_w)
            runner.inputs = {
                "ex4": {},
                "train": {},
                "inject": torch.load(io.BytesIO(inject), weights_only=True),
            }
            run_process.run_guarded(runner, ns, run, results_w, BLOCK, seconds, prepared=guard)
        except BaseException:  # noqa: BLE001
            code = 1
        finally:
            real_exit(code)
    os.close(results_w)
    data = bytearray()
    while chunk := os.read(results_r, 1 << 20):
        data += chunk
        if len(data) > MAX_RUN_BYTES:
            kill(pid)
            break
    os.close(results_r)
    _, status, usage = os.wait4(pid, 0)
    code = 128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    if len(data) > MAX_RUN_BYTES:
        code, data = SENT_TOO_MUCH, b""
    return code, usage.ru_utime, bytes(data)


def _read_command(fd: int) -> tuple[str, float | None, bytes] | None:
    head = _read_exactly(fd, COMMAND.size)
    if head is None:
        return None
    name_size, seconds, inject_size = COMMAND.unpack(head)
    name, inject = _read_exactly(fd, name_size), _read_exactly(fd, inject_size)
    if name is None or inject is None:
        return None
    return name.decode(), (seconds or None), inject


def _read_exactly(fd: int, size: int, deadline: float | None = None) -> bytes | None:
    """`size` bytes from `fd`; None at its end or, with a deadline, when the time is up."""
    data = bytearray()
    while len(data) < size:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
        chunk = os.read(fd, min(size - len(data), 1 << 20))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


# ------------------------------------------------------------ the server's side
@dataclass
class Group:
    """One group's processes and the server's ends of its pipes."""

    workdir: str
    pid: int  # the server's child, outside the namespaces
    run_pid: int | None  # the group's process, their PID 1
    isolated: bool
    commands: int
    answers: int
    info: int

    def close(self) -> None:
        """End the group: its PID 1 first (all of its namespace goes with it), which the child
        outside then reaps before it ends; that child itself if it has not ended within a second."""
        if self.run_pid:
            kill(self.run_pid)
        deadline = time.monotonic() + (1.0 if self.run_pid else 0.0)
        while os.waitpid(self.pid, os.WNOHANG) == (0, 0):
            if time.monotonic() > deadline:
                kill(self.pid)
                kill(-self.pid)
                os.waitpid(self.pid, 0)
                break
            time.sleep(0.002)
        for fd in (self.commands, self.answers, self.info):
            os.close(fd)


class RunGroups:
    """The server's one group at a time: a run for the group's submission goes to it; any other
    request ends it first (run_process.serve)."""

    def __init__(self, warm: tuple[list, dict]):
        self.warm = warm
        self.current: Group | None = None
        self.declined: str | None = None  # the last submission's folder a group did not take

    def close(self) -> None:
        if self.current is not None:
            self.current.close()
            self.current = None

    def cores(self, req: RunRequest) -> set[int] | None:
        """The cores of the group that will take `req`, if it runs (its runs run there), else None."""
        group = self.current
        if group is None or group.workdir != str(req["workdir"]) or not groupable(req):
            return None  # a run alone, or a group yet to start: where the server is, as they fork
        try:
            return os.sched_getaffinity(group.pid)
        except OSError:
            return None

    def run(self, req: RunRequest) -> tuple[str, bytes | None, float | None]:
        workdir = str(req["workdir"])
        if self.current is not None and self.current.workdir != workdir:
            self.close()
        if self.current is None and workdir != self.declined:
            self.current = self._start(req)
            if self.current is None:
                self.declined = workdir
        if self.current is None:
            return run_process.one_run(req, self.warm)
        return self._send(self.current, req)

    def _start(self, req: RunRequest) -> Group | None:
        commands_r, commands_w = os.pipe()
        answers_r, answers_w = os.pipe()
        info_r, info_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                for fd in (commands_w, answers_r, info_r):
                    os.close(fd)
                load = lambda work: (json.loads((work / PLAN_FILE).read_text()), None)  # noqa: E731
                body = lambda plan, _: group_body(plan, self.warm, commands_r, answers_w)  # noqa: E731
                code = run_process.isolated_child(req, {commands_r, answers_w}, info_w, load, body)
            finally:
                real_exit(code)
        for fd in (commands_r, answers_w, info_w):
            os.close(fd)
        info = os.read(info_r, 5)
        run_pid, isolated = struct.unpack(">iB", info) if len(info) == 5 else (None, 0)
        group = Group(str(req["workdir"]), pid, run_pid, bool(isolated), commands_w, answers_r, info_r)
        if _read_exactly(answers_r, len(READY), time.monotonic() + START_SECONDS) != READY:
            group.close()  # declined, or could not set up: its runs go alone
            return None
        return group

    def _send(self, group: Group, req: RunRequest) -> tuple[str, bytes | None, float | None]:
        timeout = float(req["timeout"])
        try:
            inject = (Path(req["workdir"]) / INJECT_FILE).read_bytes()
            name = str(req["run"]).encode()
            seconds = run_process.request_seconds(req) or 0.0
            command = COMMAND.pack(len(name), seconds, len(inject)) + name + inject
            write_all(group.commands, command)
        except OSError as e:
            self.close()
            return f"the run group stopped: {e}", None, None
        deadline = time.monotonic() + timeout
        head = _read_exactly(group.answers, ANSWER.size, deadline)
        code, cpu, size = ANSWER.unpack(head) if head else (None, None, 0)
        data = _read_exactly(group.answers, size, deadline) if head and size <= MAX_RUN_BYTES else None
        if data is None:  # over its time, or the group ended: nothing of it is left
            status = timed_out(timeout) if time.monotonic() >= deadline else "the run group ended"
            self.close()
            return status + ("" if group.isolated else run_process.NOT_ISOLATED), None, None
        frame, _ = last_frame(bytearray(data), None)
        if code == SENT_TOO_MUCH:
            status, frame = f"stopped: the run sent more than {MAX_RUN_BYTES} bytes", None
        elif frame is TOO_BIG:
            status, frame = f"stopped: a result over {MAX_FRAME_BYTES} bytes", None
        else:
            status = status_of(code)
        return status + ("" if group.isolated else run_process.NOT_ISOLATED), frame, cpu
