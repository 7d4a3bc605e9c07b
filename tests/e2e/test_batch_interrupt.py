"""Ctrl-C during `backprop-ninja grade` stops every worker cleanly, and running the same
command again grades the rest, keeping what was finished."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

from grader.exercise import spec
from grader.grading.workers import graded_in_gradebook
from grader.incoming.submissions import write_submissions
from grader.reference.backprop_ninja.samples import DEMO
from grader.reports.scores import read_scores

from corpus import EXPECTED_ZEROS


def _nbgrader_processes(course) -> list[int]:
    """nbgrader processes working in `course` (the workers run there)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if "nbgrader" in cmd and cwd == str(course):
            found.append(int(pid))
    return found


# Starts what follows it with SIGINT as a shell's foreground command has it: handled by default,
# not blocked. The test runner's worker may carry another disposition or mask, which a child
# inherits across exec (the batch then never sees the Ctrl-C, and its run goes on to the end).
# An exec, not preexec_fn: the worker has threads. The pid stays the batch's.
AS_FROM_A_TERMINAL = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT}); os.execv(sys.argv[1], sys.argv[1:])"
)


def _signal_state(pid: int) -> str:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return "gone"
    return " ".join(line for line in status.splitlines() if line.startswith(("SigBlk", "SigIgn", "SigCgt")))


def test_ctrl_c_stops_cleanly_and_a_rerun_resumes(tmp_path, new_course):
    course = new_course(tmp_path / "course")
    # two copies of the demo class: the interrupt goes as soon as the log has its first graded
    # student, so on two workers at least 8 of the 10 are left for the rerun
    samples = [replace(s, student=f"{s.student}{k}") for k in (1, 2) for s in DEMO]
    write_submissions(samples, course=course)
    batch = [sys.executable, "-m", "grader", "grade", str(course), "--workers", "2", "--quiet"]
    proc = subprocess.Popen(
        [sys.executable, "-c", AS_FROM_A_TERMINAL, *batch],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    log = course / "reports" / "autograde.log"
    deadline = time.monotonic() + 600
    while not (log.exists() and "] graded " in log.read_text()) and time.monotonic() < deadline:
        time.sleep(0.2)
    state = _signal_state(proc.pid)  # the evidence, should Ctrl-C not stop it
    proc.send_signal(signal.SIGINT)  # what a terminal's Ctrl-C sends the batch
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, f"{state}\n{log.read_text()[-1500:]}\n{out[-1500:]}"
    assert "run the same command again" in out
    left = _nbgrader_processes(course)
    for _ in range(100):  # a worker's exit closes its warm kernel server first: a moment, not more
        if not left:
            break
        time.sleep(0.1)
        left = _nbgrader_processes(course)
    assert left == [], [
        Path(f"/proc/{pid}/cmdline").read_bytes() for pid in left
    ]  # no worker outlives the batch
    graded = course / "autograded"
    finished = graded_in_gradebook(course, [s.student for s in samples])  # a notebook file alone is no proof
    assert 0 < len(finished) < len(samples), finished
    kept = {s: (graded / s / spec.ASSIGNMENT / f"{spec.NOTEBOOK}.ipynb").stat().st_mtime_ns for s in finished}
    again = subprocess.run(batch, capture_output=True, text=True, timeout=1200)
    assert again.returncode == 0, again.stdout[-3000:]
    for student, mtime in kept.items():  # finished ones were not graded again
        assert (graded / student / spec.ASSIGNMENT / f"{spec.NOTEBOOK}.ipynb").stat().st_mtime_ns == mtime
    scores = {s.student: s.by_grade_id for s in read_scores(f"sqlite:///{course / 'gradebook.db'}")}
    for sample in samples:
        zeros = EXPECTED_ZEROS[sample.student[:-1]]
        expected = {g.grade_id: 0.0 if g.grade_id in zeros else g.points for g in spec.GRADED}
        assert scores[sample.student] == expected, sample.student
