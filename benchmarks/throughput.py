"""A class graded by the kit against stock nbgrader, on the same N submissions.

  stock      `nbgrader autograde`, plain nbgrader: the student's kernel unsandboxed, one
             process, the grades from the in-kernel test cells (the named baseline for speed)
  reference  `nbgrader autograde` with the kit's configuration and cold kernels (a Python
             started per submission; the reference for the grades)
  kit        `backprop-ninja grade` at its defaults: every core, the sandbox, the replay
  dask       the same with `--scheduler`: on a local `dask scheduler` and two `dask worker`
             processes of one thread each (benchmarks/local_cluster.py; their start-up is not
             timed), the class's own copy; its ratio to the kit's local batch (target: 1.2x)

The submissions are the grading corpus's (right and wrong answers, all four exercises answered,
so exercise 4 really trains), repeated up to N. Prints the times, the ratio to stock nbgrader,
whether the batches' grades are the reference's, the local batch's peak memory (its processes'
PSS summed, and their RSS summed: see Sampler) and where its CPU time goes (counted by the kernel
in a cgroup where this user may make one, benchmarks/cpu_account.py; else sampled), split into the
batch's start-up and each submission's once warm by a second batch of the class's first two
submissions, against the issue's target (CPU a submission over stock's seconds). Asserts nothing:
machines are shared; exits non-zero only if the Dask batch's grading command failed.

    .venv/bin/python benchmarks/throughput.py [N] [--right]   (make bench; N defaults to 40;
                                       --right: a class of right answers only, every run of it)
    .venv/bin/python benchmarks/throughput.py N --kit-only [--right]   (the kit's batch alone:
                                       time, CPU)

The corpus is mostly attacks (20 of its 35 cases), each judged with many more runs than an
honest student's; --right measures the class a TA mostly grades, stock nbgrader included.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from cpu_account import CgroupCpu, Mover, print_cpu, print_warm  # noqa: E402
from local_cluster import local_cluster  # noqa: E402

from grader.incoming.submissions import write_submissions  # noqa: E402
from grader.reports.scores import read_scores  # noqa: E402

from conftest import find_names_txt, make_course, nbgrader  # noqa: E402
from corpus import CORPUS  # noqa: E402

# nbgrader's own defaults: its Execute, its preprocessors, the python3 kernel, no kit plug-ins
STOCK_CONFIG = """import os
c = get_config()
HERE = os.path.dirname(os.path.abspath(__file__))
c.CourseDirectory.root = HERE
c.CourseDirectory.course_id = "backprop_ninja"
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(HERE, "gradebook.db")
c.Execute.timeout = 120
"""
TICK = 0.25
SMALL = 2  # the batch whose CPU is mostly start-up
TARGET_CPU, TARGET_STOCK = 1.0, 4.46  # issue 22: CPU-s a submission where stock took 4.46 s
OTHER = "other"
COORDINATOR = "batch coordinator"


class Sampler(threading.Thread):
    """Peak memory of a process tree, and its CPU time by kind of process. `peak` sums PSS: a page
    shared by k processes (torch's and the dataset's in a warm server's forks) counts 1/k in each,
    so the sum is the memory the tree really holds; `peak_rss` sums RSS, every shared page counted
    in every process that maps it (what the issue's 3.9 GiB was)."""

    def __init__(self, root: int):
        super().__init__(daemon=True)
        self.root, self.stop, self.peak, self.peak_rss = root, threading.Event(), 0, 0
        self.cpu: dict[int, tuple[str, float]] = {}
        self.ticks = os.sysconf("SC_CLK_TCK")

    def run(self) -> None:
        while not self.stop.is_set():
            tree = _tree(self.root)
            self.peak_rss = max(self.peak_rss, sum(rss for _, _, rss, _ in tree.values()))
            self.peak = max(self.peak, sum(_pss(pid) for pid in tree))
            for pid, (kind, cpu, _, _) in tree.items():
                # a process that exited but is not yet reaped has no cmdline: it keeps the kind
                # it had alive (a finished kernel or replay run was once counted as "other")
                known = self.cpu.get(pid, (kind, 0.0))[0]
                self.cpu[pid] = (known if kind == OTHER else kind, cpu / self.ticks)
            time.sleep(TICK)

    def by_kind(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for kind, seconds in self.cpu.values():
            out[kind] = out.get(kind, 0.0) + seconds
        return out


def _kind(argv: list[str]) -> str:
    nbgrader = ("grader.grading.nbgrader_main", "grader.grading.resident", "grader.grading.nbgrader_forks")
    if any(a.endswith("/nbgrader") or a in nbgrader for a in argv[:3]):
        return "nbgrader + judge (in-process)"
    if "grader.untrusted.server" in argv:
        return "replay"
    if Path(argv[0]).name == "bwrap" or "grader.confine" in argv:
        return "sandbox set-up (bwrap, launcher)"
    if "ipykernel_launcher" in argv:
        return "kernel"
    if "grader.untrusted.zygote" in argv:
        return "kernel (warm server and its forks)"
    if argv[1:4] == ["-m", "grader", "grade"]:
        return COORDINATOR
    return OTHER


def _pss(pid: int) -> int:
    """Bytes; 0 for a process gone (or not ours to read)."""
    try:
        rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0
    return next((int(line.split()[1]) * 1024 for line in rollup.splitlines() if line.startswith("Pss:")), 0)


def _tree(root: int) -> dict[int, tuple[str, int, int, int]]:
    """pid -> (kind, utime+stime ticks, rss bytes, parent) for `root` and its descendants."""
    procs = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        procs[int(entry)] = (
            _kind(argv),
            int(fields[11]) + int(fields[12]),
            int(fields[21]) * 4096,
            int(fields[1]),
        )
    keep, todo = {}, [root]
    while todo:
        pid = todo.pop()
        if pid in procs and pid not in keep:
            keep[pid] = procs[pid]
            todo += [p for p, info in procs.items() if info[3] == pid]
    return keep


def _batch(course: Path) -> tuple[float, Sampler, dict[str, float] | None]:
    """The kit's batch: its seconds, its sampler, and its CPU by kind counted by the kernel (a
    cgroup, benchmarks/cpu_account.py; None where this user has none to write)."""
    account = CgroupCpu.open("bn-throughput")
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "grader", "grade", str(course), "--force", "--quiet"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=account.enter if account else None,
    )
    sampler = Sampler(proc.pid)
    sampler.start()
    mover = Mover(account, proc.pid, _kind, {OTHER, COORDINATOR}) if account else None
    if mover:
        mover.start()
    proc.wait()
    sampler.stop.set()
    seconds = time.perf_counter() - t0
    if mover is None:
        return seconds, sampler, None
    mover.stop.set()
    mover.join()
    try:
        return seconds, sampler, account.usage(rest=f"{COORDINATOR} (and what it started)")
    finally:
        account.close()


def _dask_batch(course: Path) -> tuple[float, int]:
    """The kit's batch through a local Dask cluster of two workers: its seconds, its exit status."""
    with local_cluster(2) as cluster, tempfile.TemporaryFile("w+") as out:
        cmd = [sys.executable, "-m", "grader", "grade", str(course), "--force", "--quiet"]
        t0 = time.perf_counter()
        rc = subprocess.run([*cmd, "--scheduler", cluster.address], stdout=out, stderr=out).returncode
        seconds = time.perf_counter() - t0
        if rc != 0:
            out.seek(0)
            print(cluster.tails(), out.read()[-3000:], file=sys.stderr)
    return seconds, rc


def _cases(right: bool) -> tuple[list, str]:
    """The corpus, or its right answers only (no zeros, carried errors or signs of cheating);
    and what to call the class."""
    if not right:
        return CORPUS, "corpus cases"
    return [c for c in CORPUS if not (c.zeros or c.carried or c.suspicious)], "the corpus's right answers"


def main(n: int, right: bool = False) -> int:
    names = find_names_txt()
    if names is None:
        sys.exit("names.txt not found: run `make data` or set NAMES_TXT")
    pool, which = _cases(right)
    cases = [pool[i % len(pool)] for i in range(n)]
    samples = [replace(c.sample, student=f"s{i:03d}_{c.sample.student}") for i, c in enumerate(cases)]
    with tempfile.TemporaryDirectory() as tmp:
        stock_course, ref_course, course, dask_course = (
            make_course(Path(tmp) / f, names) for f in ("stock", "ref", "kit", "dask")
        )
        (stock_course / "nbgrader_config.py").write_text(STOCK_CONFIG)
        for folder in (stock_course, ref_course, course, dask_course):
            nbgrader(folder, "generate_assignment", "backprop_ninja", "--force")
            write_submissions(samples, course=folder)
        seconds = {}
        for name, folder in (("stock", stock_course), ("reference", ref_course)):
            t0 = time.perf_counter()
            cold = ["--LimitedExecute.warm_kernels=False"] if name == "reference" else []
            nbgrader(folder, "autograde", "backprop_ninja", "--force", *cold, check=False)
            seconds[name] = time.perf_counter() - t0
        kit, sampler, counted = _batch(course)
        small_cpu = _small_batch(Path(tmp) / "small", names, samples[:SMALL])
        dask, dask_rc = _dask_batch(dask_course)
        reference, kit_scores, dask_scores = _scores(ref_course), _scores(course), _scores(dask_course)
    same = sum(reference.get(s.student) == kit_scores.get(s.student) for s in samples)
    same_dask = sum(reference.get(s.student) == dask_scores.get(s.student) for s in samples)
    stock = seconds["stock"]
    print(f"submissions: {n} ({which} repeated), {os.cpu_count()} cores")
    print(f"stock nbgrader                   {stock:7.1f} s  {stock / n:5.2f} s/submission  (named baseline)")
    ref = seconds["reference"]
    print(f"kit config, serial, cold kernels {ref:7.1f} s  {ref / n:5.2f} s/submission")
    print(f"kit batch (warm kernels)         {kit:7.1f} s  {kit / n:5.2f} s/submission")
    failed = f"  (its grading command FAILED: exit status {dask_rc})" if dask_rc else ""
    print(f"kit batch on Dask, 2 workers     {dask:7.1f} s  {dask / n:5.2f} s/submission{failed}")
    print(f"ratio stock/kit batch {stock / kit:5.2f}x")
    print(f"ratio Dask/kit batch  {dask / kit:5.2f}x  (target: within 1.20x)")
    print(
        f"grades identical to `nbgrader autograde` with the kit's configuration, cold kernels: "
        f"{'yes' if same == n else 'NO'} ({same}/{n})"
    )
    print(
        f"grades of the Dask batch identical to those: {'yes' if same_dask == n else 'NO'} ({same_dask}/{n})"
    )
    print(
        f"peak memory of the kit batch: {sampler.peak / 2**30:.2f} GiB PSS (a shared page divided among "
        f"its processes); {sampler.peak_rss / 2**30:.2f} GiB RSS summed (counted in each process)"
    )
    cpu = print_cpu(counted, sampler.by_kind(), n, TICK)
    print_warm(cpu, small_cpu, (n, SMALL), stock / n, (TARGET_CPU, TARGET_STOCK))
    return 1 if dask_rc != 0 else 0


def _small_batch(folder: Path, names: Path, samples: list) -> dict[str, float]:
    """The kit's batch of the class's first few submissions: its CPU by kind (start-up and all)."""
    course = make_course(folder, names)
    nbgrader(course, "generate_assignment", "backprop_ninja", "--force")
    write_submissions(samples, course=course)
    _, sampler, counted = _batch(course)
    return counted or sampler.by_kind()


def _scores(course: Path) -> dict:
    return {s.student: s.by_grade_id for s in read_scores(f"sqlite:///{course / 'gradebook.db'}")}


def kit_only(n: int, right: bool = False) -> int:
    """The kit's batch alone (no stock, reference or Dask run): its time and its CPU by kind,
    for measuring a change to the kit quickly. Compares no grades. `right`: a class whose every
    answer is right (the corpus's full-marks cases), where the replay runs about twice a
    submission; the corpus as a whole is mostly wrong answers, with a run for each wrong gradient."""
    names = find_names_txt()
    if names is None:
        sys.exit("names.txt not found: run `make data` or set NAMES_TXT")
    cases, which = _cases(right)
    samples = [replace(cases[i % len(cases)].sample, student=f"s{i:03d}") for i in range(n)]
    with tempfile.TemporaryDirectory() as tmp:
        course = make_course(Path(tmp) / "kit", names)
        nbgrader(course, "generate_assignment", "backprop_ninja", "--force")
        write_submissions(samples, course=course)
        kit, sampler, counted = _batch(course)
    print(f"submissions: {n} ({which} repeated), {os.cpu_count()} cores")
    print(f"kit batch (warm kernels)         {kit:7.1f} s  {kit / n:5.2f} s/submission")
    print_cpu(counted, sampler.by_kind(), n, TICK)
    return 0


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    count = int(args[0]) if args else 40
    right = "--right" in sys.argv
    sys.exit(kit_only(count, right) if "--kit-only" in sys.argv else main(count, right))
