"""CPU time of a process tree, counted by the kernel: a cgroup of the tree, with a sub-group per
kind of process. Sampling /proc misses what a process spends between the last sample and its end,
and all of a process that lives less than a tick: the replay's runs (60 ms each) were nearly all
missed, and the sampled sum was 2.02 CPU-s a submission where the kernel counted 3.03.

A cgroup counts every task in it, to the nanosecond, alive or gone. A process is moved into its
kind's group as soon as it is seen (every 10 ms); what it forks after that is born there. What
was forked before the move stays in the group it was born in (at worst its parent's kind).

Needs a cgroup hierarchy this user can write: cgroup v1's cpuacct (cpuacct.usage) or cgroup v2
(cpu.stat's usage_usec). Where there is none, `CgroupCpu.open` returns None and the caller falls
back to sampling, and says so."""

from __future__ import annotations

import os
import re
import shutil
import threading
import time
from pathlib import Path

V1 = Path("/sys/fs/cgroup/cpuacct")
V2 = Path("/sys/fs/cgroup/unified")
V2_ROOT = Path("/sys/fs/cgroup")
MOVE_EVERY = 0.01


def _v2_usage(group: Path) -> float:
    for line in (group / "cpu.stat").read_text().splitlines():
        if line.startswith("usage_usec "):
            return int(line.split()[1]) / 1e6
    return 0.0


def _v1_usage(group: Path) -> float:
    return int((group / "cpuacct.usage").read_text()) / 1e9


class CgroupCpu:
    """The tree's group (`root`, where the tree's first process puts itself: `enter`) and one
    sub-group per kind. `usage()` is every kind's CPU seconds, and the rest (what stayed in the
    root group) under `rest`."""

    def __init__(self, root: Path, usage):
        self.root, self._usage = root, usage
        self.groups: dict[str, Path] = {}
        self.moved: dict[int, str] = {}

    @classmethod
    def open(cls, name: str) -> CgroupCpu | None:
        for base, usage in ((V1, _v1_usage), (V2, _v2_usage), (V2_ROOT, _v2_usage)):
            if not (base / "cgroup.procs").exists() or not os.access(base, os.W_OK):
                continue
            root = base / f"{name}-{os.getpid()}"
            try:
                root.mkdir()
                usage(root)
            except OSError:
                shutil.rmtree(root, ignore_errors=True)
                continue
            return cls(root, usage)
        return None

    def enter(self) -> None:
        """In the tree's first process (a Popen's preexec_fn): it and all it starts count here."""
        (self.root / "cgroup.procs").write_text(str(os.getpid()))

    def adopt(self, pid: int, kind: str) -> None:
        """`pid` and what it forks from now on count as `kind` (again when its kind changes: a
        process seen between its fork and its exec had its parent's)."""
        if self.moved.get(pid) == kind:
            return
        self.moved[pid] = kind
        group = self.groups.get(kind)
        if group is None:
            group = self.root / (re.sub(r"[^A-Za-z0-9]+", "_", kind).strip("_") or "kind")
            group.mkdir(exist_ok=True)
            self.groups[kind] = group
        try:
            (group / "cgroup.procs").write_text(str(pid))
        except OSError:
            pass  # gone already: its time stays where it ran

    def usage(self, rest: str) -> dict[str, float]:
        """CPU seconds by kind; cgroups count their sub-groups, so the root's own is the rest."""
        out = {kind: self._usage(group) for kind, group in self.groups.items()}
        out[rest] = max(self._usage(self.root) - sum(out.values()), 0.0)
        return out

    def close(self) -> None:
        """Remove the groups (their processes have ended by now; any left are moved out)."""
        for group in [*self.groups.values(), self.root]:
            for _ in range(50):
                try:
                    group.rmdir()
                    break
                except OSError:
                    for pid in (group / "cgroup.procs").read_text().split():
                        try:
                            (group.parent / "cgroup.procs").write_text(pid)
                        except OSError:
                            pass
                    time.sleep(0.1)


class Mover(threading.Thread):
    """Moves each process of the tree under `root` into its kind's group as soon as it is seen
    (`kind_of(argv)`; kinds in `skip` stay where they were born). Reads a new process's parent
    once, and only the tree's command lines after that: light enough to run every 10 ms."""

    def __init__(self, account: CgroupCpu, root: int, kind_of, skip: set[str]):
        super().__init__(daemon=True)
        self.account, self.kind_of, self.skip = account, kind_of, skip
        self.parent: dict[int, int] = {}
        self.tree: set[int] = {root}
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            self.scan()
            time.sleep(MOVE_EVERY)

    def scan(self) -> None:
        alive = {int(e) for e in os.listdir("/proc") if e.isdigit()}
        for pid in sorted(alive - self.parent.keys()):  # parents are older: lower pids first
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
            except OSError:
                continue
            self.parent[pid] = int(stat[stat.rindex(")") + 2 :].split()[1])
            if self.parent[pid] in self.tree:
                self.tree.add(pid)
        for pid in self.tree & alive:
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
            except OSError:
                continue
            kind = self.kind_of(argv)
            if kind not in self.skip:
                self.account.adopt(pid, kind)
        for pid in self.parent.keys() - alive:  # gone: a pid may come back as someone else
            del self.parent[pid]
            self.tree.discard(pid)


def once_warm(
    at_n: dict[str, float], at_small: dict[str, float], n: int, small: int
) -> tuple[dict[str, float], dict[str, float]]:
    """(each kind's CPU a submission once warm, each kind's start-up a batch), from two batches of
    one class: n submissions and its first `small`. What the larger costs more is all submissions'
    work (imports, warm servers and the dataset are made once in either); the smaller's rest is
    its start-up."""
    if n <= small:
        raise ValueError(f"two batches of different sizes are needed, not {n} and {small}")
    kinds = at_n.keys() | at_small.keys()
    per = {k: (at_n.get(k, 0.0) - at_small.get(k, 0.0)) / (n - small) for k in kinds}
    start = {k: at_small.get(k, 0.0) - small * per[k] for k in kinds}
    return per, start


def print_cpu(counted: dict[str, float] | None, sampled: dict[str, float], n: int, tick: float) -> dict:
    """CPU by kind of process: the kernel's count where a cgroup was writable; else /proc sampled,
    which misses short-lived processes (the replay's runs) and says so. Not the batch's rusage:
    not every process of the tree is reaped through the batch (24.8 s where 61.6 s were spent).
    Returns what it printed."""
    cpu = counted or sampled
    total = sum(cpu.values()) or 1.0
    how = "counted by the kernel (a cgroup)" if counted else "sampled from /proc (LOW: misses the short)"
    print(f"cpu {how}, every process of the batch  {total:7.1f} s  {total / n:5.2f} s/submission")
    for kind, seconds in sorted(cpu.items(), key=lambda kv: -kv[1]):
        share = 100 * seconds / total
        print(f"  cpu {kind:34s} {seconds:7.1f} s  {seconds / n:5.2f} s/submission  {share:4.0f}%")
    if counted:
        low = sum(sampled.values())
        print(f"  (sampling /proc every {tick} s would have seen {low / n:.2f} s/submission of it)")
    return cpu


def print_warm(cpu: dict, small: dict, sizes: tuple[int, int], stock: float, target: tuple) -> None:
    """A batch's CPU split into its start-up and each submission's once warm (once_warm), against
    `target`: (CPU-s a submission, where stock nbgrader took these seconds a submission)."""
    n, few = sizes
    per, start = once_warm(cpu, small, n, few)
    warm = sum(per.values())
    print(f"cpu once warm (a batch of {n} less one of {few}, over {n - few})  {warm:5.2f} s/submission")
    for kind, seconds in sorted(per.items(), key=lambda kv: -kv[1]):
        print(f"  cpu {kind:34s} {seconds:5.2f} s/submission")
    begun = sum(start.values())
    print(
        f"cpu start-up of a batch (imports, warm servers, dataset)  {begun:5.1f} s"
        f"  ({begun / n:.2f} s/submission at {n})"
    )
    total = sum(cpu.values()) / n
    print(
        f"cpu a submission / stock's seconds a submission: {total / stock:.2f}, once warm "
        f"{warm / stock:.2f} (target {target[0] / target[1]:.2f}: {target[0]} CPU-s where stock took "
        f"{target[1]} s)"
    )
