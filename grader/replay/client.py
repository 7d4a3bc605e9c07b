"""The judge's end of the replay server (grader/untrusted/server.py): start it, in the
sandbox, send it one request at a time, and take an answer only if it is the answer to
that request.

Each request carries a fresh nonce that no run ever sees; an answer is a JSON header
line with that nonce, the run's status and a size, then exactly that many bytes (the
run's result frame, which the judge validates in results.py). Anything else on
the pipe (an extra line, a wrong nonce, a header out of bounds, bytes before a request)
means the server can no longer be trusted: it is killed, restarted for the next
submission, and the run counts as failed.
"""

from __future__ import annotations

import atexit
import json
import os
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from ..confine import Sandbox, default_sandbox
from ..settings import ANSWER_SLACK_SECONDS, MAX_HEADER_BYTES, MAX_STATUS, REPLAY_START_SECONDS
from ..untrusted.protocol import BLOCK, MAX_FRAME_BYTES, AnswerHeader, RunRequest, ServerHello

Launcher = Callable[[list[str]], subprocess.Popen]
# -I: nothing from the current folder, PYTHONPATH or the user's site-packages is imported
SERVER_COMMAND = [sys.executable, "-I", "-m", "grader.untrusted.server"]


class ProtocolError(Exception):
    pass


def launch_plain(cmd: list[str]) -> subprocess.Popen:
    """The replay server as a plain child process, with no sandbox at all: never a default, only
    where a caller passes it (tests of the judge's logic; c.ReplayGrades.sandboxed = False)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k in ("PATH", "HOME", "LANG", "LC_ALL") or k.startswith("BACKPROP_NINJA_")
    }
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1")
    return subprocess.Popen(
        cmd,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


_exchange: Path | None = None


def exchange_root() -> Path:
    """Where the judge puts a submission's plan and inputs for the replay: the one folder of
    the grader's that the sandbox sees, read-only. One per grading process; it holds one
    submission's files at a time."""
    global _exchange
    if _exchange is None:
        _exchange = Path(tempfile.mkdtemp(prefix="bn-exchange-"))
        os.chmod(_exchange, 0o755)
    return _exchange


def launch_sandboxed(cmd: list[str], sandbox: Sandbox | None = None) -> subprocess.Popen:
    """The replay server inside the sandbox (default_sandbox() as it is now, unless given): the
    default launcher. Bubblewrap and limits; where staff allowed grading without bubblewrap,
    Sandbox.command's mode without it (limits, its own environment, and a warning that says what
    is gone). Nothing it can write outlives it: the exchange folder is read-only inside."""
    root = str(exchange_root())
    sandbox, lease = (sandbox or default_sandbox()).with_own_user()
    proc = subprocess.Popen(
        sandbox.command(cmd, writable={}, readonly={root: root}, cwd=root),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        preexec_fn=sandbox.limits.apply,
    )
    proc.lease = lease  # the server's own user, for as long as the server lives
    return proc


class ReplayServer:
    """A warm `python -m grader.untrusted.server`: torch imported and the shared setup cells
    run once, then one isolated fork per run. Restarted when anything about it is off."""

    def __init__(self, prefix: list[dict], launcher: Launcher = launch_sandboxed):
        self.prefix, self.launcher = prefix, launcher
        self.home = Path(tempfile.mkdtemp(prefix="replay-server-", dir=exchange_root()))
        os.chmod(self.home, 0o755)
        self.proc: subprocess.Popen | None = None
        self._buf = bytearray()

    def _start(self, data: dict[str, Path]) -> None:
        for name, path in data.items():
            shutil.copy(path, self.home / name)
            os.chmod(self.home / name, 0o444)
        self._buf = bytearray()
        self.proc = self.launcher(SERVER_COMMAND)
        hello: ServerHello = {"prefix": self.prefix, "data_dir": str(self.home)}
        self._send(hello)
        ready = json.loads(self._line(time.monotonic() + REPLAY_START_SECONDS))
        if not ready.get("ready"):
            self.close()
            raise RuntimeError(f"the replay server did not start: {ready}")

    def replay(
        self,
        workdir: Path,
        *,
        run: str,
        data: dict[str, Path],
        timeout: float,
        autograd: str = BLOCK,
        statement_seconds: float | None = None,
        group: bool = False,
        train: bool = True,
    ) -> tuple[str, bytes | None, float | None, float | None]:
        """(status, the run's result frame or None, the run's CPU seconds as the kernel counted
        them, the pace around the run as the server timed it (grader/exercise/pace.py)).
        `autograd`: one of the protocol's GUARD_MODES (grader/untrusted/autograd_guard.py);
        `statement_seconds`: this run's, if not the plan's; `group`: the run may go to the
        submission's run group (grader/untrusted/run_group.py), with the runs before it; `train`:
        exercise 4's training loop too."""
        if self.proc is not None and (self.proc.poll() is not None or self._stray_bytes()):
            self.close()  # died, or said something nobody asked for
        if self.proc is None:
            self._start(data)
        nonce = secrets.token_hex(16)
        try:
            request: RunRequest = {
                "workdir": str(workdir),
                "run": run,
                "timeout": timeout,
                "nonce": nonce,
                "autograd": autograd,
                "statement_seconds": statement_seconds,
                "group": group,
                "train": train,
            }
            self._send(request)
            return self._answer(nonce, time.monotonic() + timeout + ANSWER_SLACK_SECONDS)
        except (OSError, ValueError, TimeoutError, ProtocolError) as e:
            self.close()  # a submission that takes the server down costs only itself
            return f"the replay server stopped: {e}", None, None, None

    def _answer(self, nonce: str, deadline: float) -> tuple[str, bytes | None, float | None, float | None]:
        header: AnswerHeader = json.loads(self._line(deadline))
        if not isinstance(header, dict) or header.get("nonce") != nonce:
            raise ProtocolError("its answer did not match the request")
        size, status = header.get("size"), header.get("status")
        if type(size) is not int or not 0 <= size <= MAX_FRAME_BYTES or not isinstance(status, str):
            raise ProtocolError("its answer was malformed")
        frame = self._exactly(size, deadline)
        cpu = header.get("cpu")
        cpu = float(cpu) if type(cpu) in (int, float) and 0 <= cpu < 1e6 else None
        pace = header.get("pace")
        pace = pace if type(pace) is float and 0 < pace < 1 else None
        return status[:MAX_STATUS], (frame or None), cpu, pace

    def _send(self, obj: dict) -> None:
        self.proc.stdin.write((json.dumps(obj) + "\n").encode())
        self.proc.stdin.flush()

    def _fill(self, deadline: float) -> None:
        fd = self.proc.stdout.fileno()
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            raise TimeoutError("no answer in time")
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            raise OSError("the server exited")
        self._buf += chunk

    def _line(self, deadline: float) -> bytes:
        while b"\n" not in self._buf:
            if len(self._buf) > MAX_HEADER_BYTES:
                raise ProtocolError("an over-long header")
            self._fill(deadline)
        line, _, rest = bytes(self._buf).partition(b"\n")
        self._buf = bytearray(rest)
        return line

    def _exactly(self, size: int, deadline: float) -> bytes:
        while len(self._buf) < size:
            self._fill(deadline)
        data, self._buf = bytes(self._buf[:size]), self._buf[size:]
        return data

    def _stray_bytes(self) -> bool:
        if self._buf:
            return True
        ready, _, _ = select.select([self.proc.stdout.fileno()], [], [], 0)
        return bool(ready)

    def close(self) -> None:
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
            self.proc = None
        self._buf = bytearray()


_servers: dict[str, ReplayServer] = {}


def server_for(prefix: list[dict], launcher: Launcher) -> ReplayServer:
    name = getattr(launcher, "func", launcher).__name__
    key = json.dumps([prefix, name, repr(getattr(launcher, "keywords", ""))])
    if key not in _servers:
        _servers[key] = ReplayServer(prefix, launcher)
    return _servers[key]


@atexit.register
def close_servers() -> None:
    for server in _servers.values():
        server.close()
    if _exchange is not None:
        shutil.rmtree(_exchange, ignore_errors=True)
