"""A real Dask cluster on this machine for the benchmarks: one `dask scheduler` and a few
`dask worker` processes on 127.0.0.1 (each `--nthreads 1`, no dashboard, a local directory of
its own), each in a session of its own so it can be killed with its whole process group, as
tests/e2e/test_cluster.py starts them. Their logs go to files in a temporary folder; when the
block fails, or a caller asks (LocalCluster.tails), their last lines are printed.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

DASK = Path(sys.executable).parent / "dask"
STOP_SECONDS = 30


@dataclass
class LocalCluster:
    address: str
    folder: Path
    workers: list[subprocess.Popen] = field(default_factory=list)
    others: list[subprocess.Popen] = field(default_factory=list)  # the scheduler

    def _start(self, *args: str, log: str) -> subprocess.Popen:
        with open(self.folder / log, "w") as out:
            return subprocess.Popen(
                [str(DASK), *args],
                cwd=self.folder,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def add_worker(self) -> subprocess.Popen:
        """One more worker (a replacement, say); not waited for."""
        k = len(self.workers) + 1
        local = self.folder / f"w{k}"
        args = ("worker", self.address, "--nthreads", "1", "--no-dashboard", "--local-directory", str(local))
        self.workers.append(self._start(*args, log=f"worker{k}.log"))
        return self.workers[-1]

    def wait_for_workers(self, n: int, timeout: float = 120) -> None:
        from distributed import Client

        with Client(self.address, timeout=60) as client:
            client.wait_for_workers(n, timeout=timeout)

    def tails(self, chars: int = 2000) -> str:
        parts = []
        for log in sorted(self.folder.glob("*.log")):
            parts.append(f"----- {log.name} (last {chars} characters) -----")
            parts.append(log.read_text(errors="replace")[-chars:])
        return "\n".join(parts)


def kill_group(proc: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
    """`sig` to the process group of `proc` (started in a session of its own)."""
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass


def descendants(root: int) -> dict[int, str]:
    """pid -> start time (as /proc gives it) of `root` and every process below it."""
    parents, started = {}, {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        parents[int(entry)], started[int(entry)] = int(fields[1]), fields[19]
    keep, todo = {}, [root]
    while todo:
        pid = todo.pop()
        if pid in started and pid not in keep:
            keep[pid] = started[pid]
            todo += [p for p, parent in parents.items() if parent == pid]
    return keep


def still_alive(procs: dict[int, str]) -> list[int]:
    """Those of `procs` (descendants()) that still run: same pid, same start time, not a zombie."""
    alive = []
    for pid, start in procs.items():
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[19] == start and fields[0] != "Z":
            alive.append(pid)
    return alive


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _group_alive(proc: subprocess.Popen) -> bool:
    try:
        os.killpg(proc.pid, 0)
        return True
    except ProcessLookupError:
        return False


def _stop(procs: list[subprocess.Popen]) -> None:
    """SIGTERM to each process itself, so Dask ends its worker and the worker's resident
    nbgrader sees its pipe close and ends as it would (its own clean-up runs); whatever of a
    process group still runs STOP_SECONDS later gets SIGKILL."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_SECONDS
    for proc in procs:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
        while _group_alive(proc) and time.monotonic() < deadline:
            time.sleep(0.2)
        kill_group(proc, signal.SIGKILL)
        proc.wait()


@contextmanager
def local_cluster(workers: int = 2) -> Iterator[LocalCluster]:
    """A scheduler and `workers` workers, all connected when the block starts; all stopped
    when it ends (_stop)."""
    with tempfile.TemporaryDirectory(prefix="bn-dask-") as tmp:
        port = _free_port()
        cluster = LocalCluster(f"tcp://127.0.0.1:{port}", Path(tmp))
        try:
            scheduler = ("scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard")
            cluster.others.append(cluster._start(*scheduler, log="scheduler.log"))
            for _ in range(workers):
                cluster.add_worker()
            cluster.wait_for_workers(workers)
            yield cluster
        except BaseException:
            print(cluster.tails(), file=sys.stderr)
            raise
        finally:
            _stop(cluster.workers)  # first: a worker without its scheduler waits for it
            _stop(cluster.others)
