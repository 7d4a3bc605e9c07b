"""A resident nbgrader: one process that runs nbgrader command after command, in one course
folder, for a cluster worker's tasks (remote.py). What an `nbgrader autograde` starts for its
process (the warm kernel server, the replay server, the judge's dataset, the imports of
nbgrader and torch) then serves every later task of the worker, as it serves a local worker's
whole share, instead of being started again for each task of a few submissions.

The process (`python -m grader.grading.resident`) reads one JSON list of nbgrader's arguments a
line on stdin and answers each with a line `{"rc": N}` on the descriptor its argument names (a
pipe of its own: nothing nbgrader or the kit prints can look like an answer); what nbgrader
logs goes to its stdout and stderr (a log file of the caller's). It ends when stdin closes: when
its Dask worker ends, however it ends, and its servers with it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from ..settings import RESIDENT_LOG_BYTES
from .nbgrader_cli import NBGRADER, nbgrader_env
from .nbgrader_main import skip_iri_checker, start_up_uncollected


class _Terminated(BaseException):
    """SIGTERM (a worker stopped with its process group): out of any command, past its handlers,
    so that the process ends as when its input closes, its servers closed (atexit)."""


def _terminate(signum, frame):
    raise _Terminated


def _clear_apps() -> None:
    """traitlets keeps each Application a singleton: the next command gets new ones."""
    from traitlets.config import Application

    todo = [Application]
    while todo:
        cls = todo.pop()
        todo += cls.__subclasses__()
        cls.clear_instance()


def run_one(argv: list[str]) -> int:
    """One nbgrader command in this process: its exit status, as the command line gives it."""
    from nbgrader.apps.nbgraderapp import NbGraderApp

    try:
        NbGraderApp.launch_instance(argv=argv)
        return 0
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except Exception as e:  # a crash of one command is its status: the next one still runs
        print(f"nbgrader crashed: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        return 1
    finally:
        _clear_apps()
        sys.stdout.flush()
        sys.stderr.flush()


def main(reply_fd: int) -> int:
    skip_iri_checker()
    with start_up_uncollected():
        import nbgrader.apps.nbgraderapp  # noqa: F401 - once, for every command
    signal.signal(signal.SIGTERM, _terminate)
    replies = os.fdopen(reply_fd, "w", buffering=1)
    try:
        for line in sys.stdin:
            rc = run_one([str(a) for a in json.loads(line)])
            replies.write(json.dumps({"rc": rc}) + "\n")
    except _Terminated:
        return 143  # as a shell reports SIGTERM
    return 0


class Resident:
    """The caller's side: the process, started in `course` on first use and again after it died."""

    def __init__(self, course: Path, log: Path):
        self.course, self.log = course, log
        self.proc: subprocess.Popen | None = None
        self._replies = None
        self._lock = threading.Lock()

    def run(self, *args: str) -> tuple[int, str]:
        """(exit status, what nbgrader logged for this command)."""
        with self._lock:
            if self.proc is None or self.proc.poll() is not None:
                self._start()
            if self.log.stat().st_size > RESIDENT_LOG_BYTES:  # a soak's thousands of tasks: it appends
                os.truncate(self.log, 0)
            start = self.log.stat().st_size
            self.proc.stdin.write(json.dumps(list(args)) + "\n")
            self.proc.stdin.flush()
            answer = self._replies.readline()
            said = _read_from(self.log, start)
            if not answer:  # it died mid-command (a crash, a kill): the next command starts anew
                self.proc.wait()
                return -1, said + f"\n[the resident nbgrader ended: status {self.proc.returncode}]\n"
            return int(json.loads(answer)["rc"]), said

    def _start(self) -> None:
        self.close()
        self.log.parent.mkdir(parents=True, exist_ok=True)
        read, write = os.pipe()
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [NBGRADER[0], "-m", __name__, str(write)],
                cwd=self.course,
                env=nbgrader_env(),
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=subprocess.STDOUT,
                text=True,
                pass_fds=(write,),
            )
        os.close(write)
        self._replies = os.fdopen(read, "r")

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()  # it ends its servers and exits
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._replies is not None:
            self._replies.close()
        self.proc = self._replies = None


def _read_from(path: Path, offset: int) -> str:
    with open(path, "rb") as f:
        f.seek(offset)
        return f.read().decode(errors="replace")


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1])))
