"""A soak of cluster grading: N submissions through two local Dask workers, one of them killed
half-way through its work, and whether the class still comes out whole and right.

The submissions are the grading corpus's cases repeated up to N (as benchmarks/throughput.py
builds them). `python -m grader grade COURSE --force --quiet --scheduler ...` grades them on a
local `dask scheduler` and two `dask worker` processes (benchmarks/local_cluster.py). Once about
a third of them are graded, worker 1 is killed with SIGKILL to its whole process group (nanny,
worker, its resident nbgrader and whatever of its servers shares the group), and a replacement
worker is started at once, so the batch ends on two workers again and the replacement has to
get the course's common files from the survivor.

Printed: whether every submission was graded exactly once (one "graded" line each in the
coordinator's log, reports/autograde.log; one submission each in nbgrader's gradebook with every
grade cell scored; none missing, none extra); whether each student's grades are those its
corpus case gets from the local batch (`--workers 2`, one submission per distinct case, in a
course of its own), and whether those are the corpus's hand-worked grades (tests/corpus.py);
the time a submission in each window of the batch (0-50, 50-100, 100-200, 200-500, 500-1000,
the last one ending at N), to see it stay flat as N grows; and the coordinator's memory when
50, 100, 200, 500 and 1000 (as N allows) and N submissions are graded, counted by polling
(every POLL seconds) the coordinator's log and /proc of the `python -m grader grade` process:
RSS, the pages it has in memory, shared ones counted whole, and PSS (/proc/PID/smaps_rollup),
where each page shared with other processes counts for its share only (a page shared by four
processes counts a quarter). Its peak RSS (VmHWM) too; and the processes of the killed worker
that outlived it (ended here afterwards, by pid). Asserts nothing: machines are shared; exits
non-zero only if a grading command failed.

    .venv/bin/python benchmarks/soak.py [--n 200]        (make bench; --n 1000 for the long one)
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT), str(ROOT / "benchmarks")]

from local_cluster import descendants, kill_group, local_cluster, still_alive  # noqa: E402
from nbgrader.api import Gradebook  # noqa: E402

from grader.exercise import spec  # noqa: E402
from grader.incoming.submissions import write_submissions  # noqa: E402
from grader.reports.scores import read_scores  # noqa: E402

from conftest import find_names_txt, make_course, nbgrader  # noqa: E402
from corpus import CORPUS  # noqa: E402

POLL = 0.5
MARKS = (50, 100, 200, 500, 1000)
GRADED = re.compile(r"^\[\d\d:\d\d:\d\d\] graded (\S+) \(\d+/\d+\)$", re.M)
FINAL_FAILURE = re.compile(r"^\[\d\d:\d\d:\d\d\] NOT GRADED (?!yet)", re.M)
RETRIED = re.compile(r"^\[\d\d:\d\d:\d\d\] NOT GRADED yet", re.M)
STARTED = re.compile(r"^\[\d\d:\d\d:\d\d\] \d+ to grade", re.M)
ALL = [g.grade_id for g in spec.GRADED]


@dataclass
class Watch:
    """What polling the coordinator saw: times are seconds since the command started."""

    began: float | None = None  # its log's first line: preflight done, the cluster's work begins
    marks: list[tuple[int, float, int, int]] = field(default_factory=list)  # graded, time, RSS, PSS kB
    killed: tuple[int, float] | None = None  # graded, time
    doomed: dict[int, str] = field(default_factory=dict)  # the killed worker's processes
    peak: int = 0  # VmHWM, kB
    seconds: float = 0.0
    rc: int = 0


def _grade(course: Path, *args: str, out: Path) -> subprocess.Popen:
    with open(out, "w") as sink:
        cmd = [sys.executable, "-m", "grader", "grade", str(course), "--force", "--quiet", *args]
        return subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT)


def _memory(pid: int) -> tuple[int, int, int] | None:
    """RSS, PSS and peak RSS of `pid`, kB; None once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return None
    kb = lambda text, key: int(re.search(rf"^{key}:\s+(\d+) kB", text, re.M).group(1))  # noqa: E731
    return kb(status, "VmRSS"), kb(rollup, "Pss"), kb(status, "VmHWM")


def _watch(proc: subprocess.Popen, log: Path, cluster, n: int) -> Watch:
    """Polls the batch until it ends; kills worker 1 once a third of the class is graded."""
    watch, t0 = Watch(), time.monotonic()
    marks = [m for m in MARKS if m < n] + [n]
    while proc.poll() is None:
        text, now = log.read_text(errors="replace") if log.exists() else "", time.monotonic() - t0
        memory, count = _memory(proc.pid), len(GRADED.findall(text))
        if watch.began is None and STARTED.search(text):
            watch.began = now
        if memory:
            watch.peak = memory[2]
        while memory and marks and count >= marks[0]:
            watch.marks.append((count, now, memory[0], memory[1]))
            marks.pop(0)
        if watch.killed is None and count >= max(1, n // 3):
            victim = cluster.workers[0]
            watch.doomed = descendants(victim.pid)
            kill_group(victim, signal.SIGKILL)
            victim.wait()
            cluster.add_worker()
            watch.killed = (count, now)
        time.sleep(POLL)
    watch.seconds, watch.rc = time.monotonic() - t0, proc.returncode
    return watch


def _expected(tmp: Path, names: Path, n: int) -> tuple[dict, float, int]:
    """Each distinct case's grades from the local batch (`--workers 2`) in a course of its own:
    the grades, the batch's seconds and its exit status."""
    course = make_course(tmp / "local", names)
    nbgrader(course, "generate_assignment", "backprop_ninja", "--force")
    write_submissions([c.sample for c in CORPUS[:n]], course=course)
    t0 = time.monotonic()
    rc = _grade(course, "--workers", "2", out=tmp / "local.out").wait()
    return _scores(course), time.monotonic() - t0, rc


def _scores(course: Path) -> dict[str, dict[str, float]]:
    return {s.student: s.by_grade_id for s in read_scores(f"sqlite:///{course / 'gradebook.db'}")}


def _once(course: Path, students: list[str], log: str) -> dict[str, int]:
    """Graded exactly once: the log's lines, and the gradebook's submissions and grade cells."""
    lines = Counter(GRADED.findall(log))
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        held = Counter(s.student.id for s in gb.find_assignment(spec.ASSIGNMENT).submissions)
        whole = 0
        for student in (s for s in students if held[s] == 1):
            nb = gb.find_submission_notebook(spec.NOTEBOOK, spec.ASSIGNMENT, student)
            scored = {g.name for g in nb.grades if g.score is not None}
            whole += scored >= set(ALL)
    return {
        "whole": whole,
        "missing": sum(held[s] == 0 for s in students),
        "extra": len(set(held) - set(students)),
        "twice in the gradebook": sum(k > 1 for k in held.values()),
        "logged twice": sum(k > 1 for k in lines.values()),
        "not logged": len(set(students) - set(lines)),
        "final failures": len(FINAL_FAILURE.findall(log)),
        "retried": len(RETRIED.findall(log)),
    }


def _windows(watch: Watch) -> list[str]:
    """A row a window: its submissions, when it ended, its time a submission, the memory then."""
    rows, (done, then) = [], (0, watch.began or 0.0)
    for count, now, rss, pss in watch.marks:
        per = (now - then) / max(1, count - done)
        window = f"{done}-{count}"
        rows.append(f"  {window:>10s} {now:8.1f} s {per:10.2f} {rss / 1024:12.1f} MiB {pss / 1024:7.1f} MiB")
        done, then = count, now
    return rows


def _report(n: int, watch: Watch, once: dict, same: int, local: tuple, leftover: list[int]) -> None:
    distinct, local_s, local_same = local
    print(f"soak: {n} submissions (the corpus's cases repeated) on 2 dask workers, {os.cpu_count()} cores")
    if watch.killed:
        count, at = watch.killed
        print(
            f"worker 1 killed (SIGKILL to its process group, {len(watch.doomed)} processes) at {count}/{n} "
            f"graded, {at:.1f} s in; a replacement worker started at once"
        )
    else:
        print("NO worker was killed: the batch ended first")
    ok = once["whole"] == n and not any(v for k, v in once.items() if k not in ("whole", "retried"))
    details = ", ".join(f"{k} {v}" for k, v in once.items() if k != "whole")
    print(
        f"every submission graded exactly once: {'yes' if ok else 'NO'} "
        f"({once['whole']}/{n} whole in the gradebook; {details})"
    )
    print(f"grades identical to the local batch: {'yes' if same == n else 'NO'} ({same}/{n})")
    print(
        f"local batch (--workers 2), one submission per case: {distinct} in {local_s:.1f} s "
        f"({local_s / distinct:.2f} s/submission); its grades are the corpus's hand-worked ones: "
        f"{'yes' if local_same == distinct else 'NO'} ({local_same}/{distinct})"
    )
    print(f"soak: {watch.seconds:.1f} s, {watch.seconds / n:.2f} s/submission (exit status {watch.rc})")
    print(f"  start-up (preflight, before the first task): {watch.began or 0.0:.1f} s")
    print("  windows (graded; ended at, since the command started; their time a submission; coordinator's")
    print("  memory at their end):")
    print(f"  {'graded':>10s} {'at':>10s} {'s/subm.':>10s} {'RSS':>16s} {'PSS':>11s}")
    print("\n".join(_windows(watch)))
    if watch.marks and watch.marks[-1][0] >= n:
        print(
            f"  after the last one graded: the recording pass and the checks "
            f"{watch.seconds - watch.marks[-1][1]:.1f} s"
        )
    print(f"coordinator's peak RSS (VmHWM): {watch.peak / 1024:.1f} MiB")
    print(f"processes of the killed worker still running after the batch: {len(leftover)} (ended now)")


def _hand_worked(scores: dict) -> int:
    expected = {
        c.sample.student: {g: 0.0 if g in c.zeros else spec.BY_GRADE_ID[g].points for g in ALL}
        for c in CORPUS
    }
    return sum(expected[s] == got for s, got in scores.items())


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200, help="submissions (default 200; 1000 for the long soak)")
    n = max(1, ap.parse_args(argv).n)
    names = find_names_txt()
    if names is None:
        sys.exit("names.txt not found: run `make data` or set NAMES_TXT")
    cases = [CORPUS[i % len(CORPUS)] for i in range(n)]
    samples = [replace(c.sample, student=f"s{i:03d}_{c.sample.student}") for i, c in enumerate(cases)]
    with tempfile.TemporaryDirectory(prefix="bn-soak-") as tmp:
        expected, local_s, local_rc = _expected(Path(tmp), names, min(n, len(CORPUS)))
        course = make_course(Path(tmp) / "soak", names)
        nbgrader(course, "generate_assignment", "backprop_ninja", "--force")
        write_submissions(samples, course=course)
        with local_cluster(2) as cluster:
            proc = _grade(course, "--scheduler", cluster.address, out=Path(tmp) / "soak.out")
            watch = _watch(proc, course / "reports" / "autograde.log", cluster, n)
            leftover = still_alive(watch.doomed)
            for pid in leftover:
                os.kill(pid, signal.SIGKILL)
            if watch.rc != 0 or local_rc != 0:
                outs = "".join((Path(tmp) / f).read_text()[-3000:] for f in ("local.out", "soak.out"))
                print(cluster.tails(), outs, file=sys.stderr)
        log = (course / "reports" / "autograde.log").read_text(errors="replace")
        once, got = _once(course, [s.student for s in samples], log), _scores(course)
    same = sum(got.get(s.student) == expected.get(c.sample.student) for s, c in zip(samples, cases))
    local = (min(n, len(CORPUS)), local_s, _hand_worked(expected))
    _report(n, watch, once, same, local, leftover)
    return 1 if watch.rc != 0 or local_rc != 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
