"""A batch's nbgrader processes, forked from one Python that has imported what each of them
would import for itself: nbgrader, torch and the kit's judge (about 3 CPU-s a process), once
for the batch instead of once a worker.

workers.py starts the server (`python -m grader.grading.nbgrader_forks`, in the course folder,
with nbgrader's environment: nbgrader_cli.py) and asks it for one `nbgrader ARGS` a share. Each
is a fork in a session of its own, its output in the share's log, and from there it is the
nbgrader process the batch started before: it reads the course's configuration, starts its
own sandboxed servers and ends with its atexit handlers. The server only imports, forks and
reaps, so every fork starts from the same state, single-threaded (it checks).

Protocol: on stdin, a JSON object a line, {"args": [...], "log": PATH}; on stdout, {"pid": N}
(or {"error": TEXT}) for each, in order, and {"ended": N, "status": S} when fork N has ended (S
as subprocess's returncode: negative for a signal). When stdin closes, the server ends its
forks' process groups and exits: nothing it forked outlives the batch.
"""

from __future__ import annotations

import ctypes
import importlib
import json
import os
import random
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from ..settings import FORKS_START_SECONDS, WORKER_STOP_SECONDS
from .nbgrader_cli import NBGRADER, nbgrader_env
from .nbgrader_main import skip_iri_checker, start_up_uncollected

# What an `nbgrader autograde` with the kit's configuration imports before its first notebook
# (the configuration names the kit's preprocessors as strings: grader/preprocessors/__init__.py).
PRELOAD = (
    "nbgrader.apps.nbgraderapp",
    "grader.preprocessors.check_cell_metadata",
    "grader.preprocessors.gradebook_rows",
    "grader.preprocessors.limited_execute",
    "grader.preprocessors.neutralise_outputs",
    "grader.preprocessors.rebuild_from_source",
    "grader.preprocessors.replay_grades",
)
# A worker computes on one thread (the kit's nbgrader_config.py asks for it before a notebook
# imports torch; here torch comes first), and with these OpenMP and OpenBLAS start no thread at
# import: a fork copies the only one. Set, not defaulted: a shell's OPENBLAS_NUM_THREADS=4 would
# start numpy's pool in the server, which would then fork no worker.
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))


def _child(request: dict, server: int, started: int) -> int:
    """In the fork: nbgrader's command line, as in a process of its own."""
    os.setsid()  # the batch stops it with its process group, its servers included
    os.close(started)  # only now may the server give out its pid: its group is its own
    # killed if the server dies (killed itself): its servers then see their input close and end
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != server:  # it died before that
        return 1
    out = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(out)
    os.close(null)
    random.seed()  # a process's own, as a fresh Python's
    sys.argv = ["nbgrader", *[str(a) for a in request["args"]]]
    from nbgrader.apps.nbgraderapp import main

    return main() or 0


def _reap(forks: set[int], say) -> None:
    for pid in list(forks):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            forks.discard(pid)
            say(ended=pid, status=os.waitstatus_to_exitcode(status))


def _end_all(forks: set[int]) -> None:
    for pid in forks:
        try:
            os.killpg(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + WORKER_STOP_SECONDS
    while forks and time.monotonic() < deadline:
        _reap(forks, lambda **_: None)
        time.sleep(0.05)
    for pid in forks:
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.waitpid(pid, 0)


def serve() -> int:
    """The server's loop; in a fork, the fork's nbgrader (its exit status)."""
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # what an import prints goes to the log, not into the protocol
    say = lambda **msg: proto.write(json.dumps(msg) + "\n")  # noqa: E731
    os.environ.update(ONE_THREAD)
    skip_iri_checker()
    with start_up_uncollected():
        for module in PRELOAD:
            importlib.import_module(module)
    forks: set[int] = set()
    buf = b""
    while True:
        if select.select([0], [], [], 0.1)[0]:
            chunk = os.read(0, 1 << 16)
            if not chunk:  # the batch is over, or gone
                _end_all(forks)
                return 0
            *lines, buf = (buf + chunk).split(b"\n")
            for line in lines:
                if _threads() != 1:  # a fork of a threaded process can hang on a lock it copied
                    say(error=f"the nbgrader server has {_threads()} threads: it forks none")
                    continue
                sys.stdout.flush()
                sys.stderr.flush()
                started_r, started_w = os.pipe()
                server, pid = os.getpid(), os.fork()
                if pid == 0:
                    proto.close()
                    os.close(started_r)
                    return _child(json.loads(line), server, started_w)
                os.close(started_w)
                os.read(started_r, 1)  # until the fork has closed it
                os.close(started_r)
                forks.add(pid)
                say(pid=pid)
        _reap(forks, say)


class Forks:
    """The batch's side: the server, started in `course` on first use and again if it died."""

    def __init__(self, course: Path, log: Path):
        self.course, self.log = course, log
        self.proc: subprocess.Popen | None = None
        self.ended: dict[int, int] = {}
        self._buf = b""

    def start(self, *args: str, log: Path) -> Forked:
        """`nbgrader ARGS`, forked, its output in `log`."""
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        self.proc.stdin.write((json.dumps({"args": list(args), "log": str(log)}) + "\n").encode())
        self.proc.stdin.flush()
        deadline = time.monotonic() + FORKS_START_SECONDS
        while True:
            answer = self._next(deadline)
            if answer is None or "pid" in answer or "error" in answer:
                break
            self._note(answer)
        if not answer or "pid" not in answer:
            silent = f"the nbgrader server did not answer (its log: {self.log.name})"
            why = (answer or {}).get("error") or silent
            log.write_text(f"not started: {why}\n")
            return Forked(self, None)
        return Forked(self, int(answer["pid"]))

    def _start(self) -> None:
        self.close()
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [NBGRADER[0], "-m", __name__],
                cwd=self.course,
                env=nbgrader_env(),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=out,
                start_new_session=True,  # a terminal's Ctrl-C reaches the batch, which ends it
            )
        self._buf = b""

    def _next(self, deadline: float) -> dict | None:
        """The server's next message; None if none came by `deadline` or the server is gone."""
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

    def _note(self, message: dict) -> None:
        if "ended" in message:
            self.ended[int(message["ended"])] = int(message["status"])

    def poll(self) -> None:
        """Whatever the server has said since the last look."""
        if self.proc is None:
            return
        while (message := self._next(time.monotonic())) is not None:
            self._note(message)

    def close(self) -> None:
        """The server ends what it forked and exits."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=WORKER_STOP_SECONDS + 30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.proc = None


class Forked:
    """One fork, as the batch looks at a process it started (workers.Share.proc): its pid,
    poll(), wait() and returncode. A fork that never started has ended, with -1."""

    def __init__(self, forks: Forks, pid: int | None):
        self.forks, self.pid = forks, pid
        self.returncode = None if pid else -1

    def poll(self) -> int | None:
        if self.returncode is None:
            self.forks.poll()
            if self.pid in self.forks.ended:
                self.returncode = self.forks.ended.pop(self.pid)
            elif self.forks.proc is None or self.forks.proc.poll() is not None:
                self.returncode = -1  # the server is gone, and with it any word of this fork
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"nbgrader fork {self.pid}", timeout)
            time.sleep(0.05)
        return self.returncode


if __name__ == "__main__":
    sys.exit(serve())
