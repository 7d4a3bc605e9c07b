"""Warm kernels: the autograde kernel forked from a server that has already imported torch
(grader/untrusted/zygote.py) instead of a fresh Python per submission.

One server per grading process, in the same bubblewrap sandbox and under a uid of its own, as a
cold kernel (kernel.py); each kernel it forks gets namespaces, folders and limits of its own.
LimitedExecute hands a kernel to it through WarmProvisioner, a jupyter_client provisioner, so
nbclient drives the kernel exactly as a cold one. Where the server cannot start, or the
kernel's folder is not where the server can make it, the kernel starts cold; so does it, and
every later one of this grading process, where the server refuses a kernel because it cannot
give it a clean slate (a fresh /tmp, an empty socket folder).
"""

from __future__ import annotations

import atexit
import dataclasses
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from jupyter_client.provisioning import LocalProvisioner

from ..settings import WARM_CLOSE_SECONDS, WARM_END_SECONDS, WARM_FORK_SECONDS, WARM_START_SECONDS
from ..untrusted.protocol import IPC_INSIDE, SUBMISSION_INSIDE, KernelStart
from .bwrap import default_sandbox, inside_environment
from .kernel import copy_submission

DATA_INSIDE = "/run/prefix-data"  # where the server runs the notebook's first cells


class WarmRefused(RuntimeError):
    """The server would not fork a kernel with a clean slate: the kernel starts cold."""


class WarmServer:
    """The zygote of this grading process, and the one kernel it runs at a time."""

    def __init__(
        self,
        *,
        stage: Path,
        prefix: list[str] = (),
        names_txt: Path | None = None,
        runtime_root: str | None = None,
    ):
        """`prefix`: the notebook's student-independent first cells, run once here (see
        grader/untrusted/kernel_prefix.py) with the instructor's `names_txt`."""
        self.stage, self.prefix, self.kernel_pid, self.exit_code = stage, list(prefix), None, None
        self.refused: str | None = None  # once set, this server forks no more kernels
        self.home = Path(tempfile.mkdtemp(prefix="bn-warm-", dir=runtime_root))
        self.ipc, self.inbox = self.home / "ipc", self.home / "inbox"
        self.ipc.mkdir(mode=0o700)
        self.inbox.mkdir(mode=0o755)
        sandbox, self._lease = default_sandbox().with_own_user()
        self.limits = sandbox.limits
        sandbox.give(self.ipc)
        data = {str(names_txt): f"{DATA_INSIDE}/names.txt"} if names_txt and names_txt.is_file() else {}
        cmd = sandbox.command(
            [sys.executable, "-I", "-m", "grader.untrusted.zygote"],
            # the second place stays reachable when a kernel's fresh /tmp covers the first
            writable=[(str(self.ipc), str(self.ipc)), (str(self.ipc), IPC_INSIDE)],
            readonly={str(self.inbox): SUBMISSION_INSIDE, **data},
            scratch=str(stage),
            cwd="/",
        )
        # the server runs for the whole batch: each kernel gets the CPU limit, not the server
        server_limits = dataclasses.replace(sandbox.limits, cpu_seconds=-1)
        with open(self.home / "server.log", "wb") as log:
            self.proc = subprocess.Popen(
                cmd,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                preexec_fn=server_limits.apply,
            )
        self._buf = b""
        self._send({"prefix": self.prefix if data else [], "data_dir": DATA_INSIDE if data else "/"})
        hello = self._next(WARM_START_SECONDS)
        self.skippable = (hello or {}).get("skippable")  # as said: prefix_block.py checks it
        if not hello or not hello.get("ready") or hello.get("threads") != 1:
            self.close()
            raise RuntimeError(f"the warm kernel server did not start: {hello or self.log_tail()}")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self) -> str:
        return (self.home / "server.log").read_bytes()[-2000:].decode(errors="replace")

    def _send(self, msg: dict) -> None:
        self.proc.stdin.write((json.dumps(msg) + "\n").encode())
        self.proc.stdin.flush()

    def _next(self, timeout: float) -> dict | None:
        """The server's next message, or None when none came in time (or it is gone)."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            left = max(0.0, deadline - time.monotonic())
            if not select.select([self.proc.stdout], [], [], left)[0]:
                return None
            chunk = os.read(self.proc.stdout.fileno(), 1 << 16)
            if not chunk:
                return None
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)

    def start_kernel(self, *, connection: dict, cwd: str, env: dict) -> WarmKernel:
        for entry in self.inbox.iterdir():  # the previous submission's files
            shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
        for note in copy_submission(Path(cwd), self.inbox):
            print(f"sandbox: not copied into the kernel's folder: {note}", file=sys.stderr)
        self._end_previous()
        _empty_folder(self.ipc)  # what the kernel before left among its sockets
        self.exit_code = None
        (self.home / "server.log").write_bytes(b"")
        request: KernelStart = {
            "connection": connection,
            "cwd": cwd,
            "stage": str(self.stage),
            "ipc": str(self.ipc),
            "env": inside_environment(env),
            "cpu_seconds": self.limits.cpu_seconds,
            "disk_mb": self.limits.disk_mb,
            "tmp_mb": self.limits.tmp_mb,
        }
        self._send({"start": request})
        reply = self._next(WARM_FORK_SECONDS)
        while reply and "exited" in reply:  # a kernel before: it was heard of as it ended
            reply = self._next(WARM_FORK_SECONDS)
        if reply and "refused" in reply:
            raise WarmRefused(
                f"the warm kernel server cannot give a kernel a clean slate: {reply['refused']}"
            )
        if not reply or "started" not in reply:
            raise RuntimeError(f"the warm kernel server did not fork a kernel: {reply or self.log_tail()}")
        self.kernel_pid = reply["started"]
        return WarmKernel(self, self.kernel_pid)

    def _end_previous(self) -> None:
        """One kernel at a time: the previous one is killed if it still runs, and its end heard."""
        if self.kernel_pid is None or self.poll() is not None:
            return
        self.kill()
        deadline = time.monotonic() + WARM_END_SECONDS
        while self.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)

    def poll(self) -> int | None:
        """The running kernel's exit code once it has ended."""
        while self.exit_code is None:
            msg = self._next(0)
            if msg is None:
                if not self.alive():
                    self.exit_code = -signal.SIGKILL  # the server is gone, and its kernel with it
                break
            if "exited" in msg and msg.get("pid") == self.kernel_pid:
                self.exit_code = msg["exited"]
                if self.exit_code not in (0, 128 + signal.SIGKILL, 128 + signal.SIGTERM):
                    print(
                        f"sandbox: a warm kernel exited with {self.exit_code}:\n{self.log_tail()}",
                        file=sys.stderr,
                    )
        return self.exit_code

    def kill(self) -> None:
        if self.alive() and self.exit_code is None:
            self._send({"kill": True})

    def close(self) -> None:
        try:
            self.proc.stdin.close()  # the server kills its kernel and exits
            self.proc.wait(timeout=WARM_CLOSE_SECONDS)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        if self._lease:
            self._lease.close()
        shutil.rmtree(self.home, ignore_errors=True)


def _empty_folder(folder: Path) -> None:
    """Everything in `folder` goes, read-only folders included (a kernel may chmod what it made
    0555), through descriptors only: no link a kernel left there is followed. WarmRefused if
    anything stays."""
    top = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        _empty_fd(top)
        left = os.listdir(top)
    except OSError as e:
        raise WarmRefused(f"the socket folder {folder} could not be emptied: {e}") from e
    finally:
        os.close(top)
    if left:
        raise WarmRefused(f"the socket folder {folder} could not be emptied: {left[:5]} stayed")


def _empty_fd(fd: int) -> None:
    for name in os.listdir(fd):
        try:
            sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
        except OSError as e:  # not a folder: a file, a socket or a link (never followed)
            if not isinstance(e, FileNotFoundError):
                os.unlink(name, dir_fd=fd)
            continue
        try:
            os.fchmod(sub, 0o700)
            _empty_fd(sub)
        finally:
            os.close(sub)
        os.rmdir(name, dir_fd=fd)


class WarmKernel:
    """What jupyter_client's provisioner expects of a Popen."""

    stdin = stdout = stderr = None

    def __init__(self, server: WarmServer, pid: int):
        self.server, self.pid = server, pid

    def poll(self) -> int | None:
        return self.server.poll()

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired("warm kernel", timeout)
            time.sleep(0.05)
        return code

    def send_signal(self, signum: int) -> None:
        if signum in (signal.SIGKILL, signal.SIGTERM):  # interrupts go as messages (kernel.json)
            self.server.kill()

    def kill(self) -> None:
        self.server.kill()

    terminate = kill


class WarmProvisioner(LocalProvisioner):
    """A LocalProvisioner whose kernel comes from the warm server; cold when it cannot."""

    server: WarmServer | None = None

    async def launch_kernel(self, cmd: list[str], **kwargs):
        cwd = str(kwargs.get("cwd") or os.getcwd())
        server = self.server
        if server is None or not Path(cwd).is_relative_to(server.stage):
            return await super().launch_kernel(cmd, **kwargs)
        connection = json.loads(Path(self.parent.connection_file).read_text())
        try:
            self.process = server.start_kernel(
                connection=connection, cwd=cwd, env=kwargs.get("env") or dict(os.environ)
            )
        except WarmRefused as e:
            server.refused = str(e)
            print(f"sandbox: {e}; this kernel and the later ones start cold", file=sys.stderr)
            return await super().launch_kernel(cmd, **kwargs)
        self.pid, self.pgid, self.cwd = self.process.pid, None, cwd
        return self.connection_info


_SERVER: WarmServer | None = None
_REFUSED: str | None = None  # why a server of this process refused a kernel: no other is started


def warm_server(
    *, cwd: str, runtime_root: str | None, prefix: list[str] = (), names_txt: Path | None = None
) -> WarmServer | None:
    """This process's server, started on first use, for kernels whose folders lie two levels
    below the stage (a course's autograded/<student>/<assignment>). None where it cannot run."""
    global _SERVER, _REFUSED
    stage = Path(cwd).resolve().parent.parent
    _REFUSED = _REFUSED or (_SERVER and _SERVER.refused) or None
    if _SERVER and (
        _REFUSED or not _SERVER.alive() or _SERVER.stage != stage or _SERVER.prefix != list(prefix)
    ):
        _SERVER.close()
        _SERVER = None
    if _SERVER is None and not _REFUSED and default_sandbox().isolated:
        try:
            _SERVER = WarmServer(stage=stage, prefix=prefix, names_txt=names_txt, runtime_root=runtime_root)
        except (OSError, RuntimeError) as e:
            print(f"sandbox: warm kernels unavailable, starting kernels cold: {e}", file=sys.stderr)
            return None
        atexit.register(_SERVER.close)
    return _SERVER
