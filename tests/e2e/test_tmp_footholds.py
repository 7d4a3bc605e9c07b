"""Issue 17, point 1, through the kit's batch command and real nbgrader: the corpus's footholds
in HOME (h44-h47 of tests/hostile.py: an IPython startup file in a folder locked 0555, a
.bashrc, a matplotlibrc, site/usercustomize in the user site) are graded first, then
classmates: two that start bash, Python, IPython and matplotlib in a cell (the probe of
tests/footholds.py) and two honest ones. Warm and cold kernels, two grading processes: the
students are dealt round robin, so each process grades two attackers, then a probe and an
honest classmate, in one warm server; every attack thus meets a probe after it in the same
server, which is what one process grading all eight showed too (it was graded that way as
well until the suite had to fit CI: 435 s more for no attack not already met).

Each attacker's own kernel ran its planted file (so the attack was live); no classmate's
graded notebook shows anything an attacker's file printed or held, every classmate has full
marks, and no process of a sandbox user is left afterwards."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import nbformat
import pytest

from grader.confine import bwrap_works, users
from grader.exercise import spec
from grader.grading.workers import split
from grader.reports.scores import read_scores

import footholds
from hostile import ALL, CASES, honest

pytestmark = pytest.mark.skipif(not bwrap_works(), reason="bubblewrap is needed (.ci/run installs it)")
NB = f"{spec.NOTEBOOK}.ipynb"
ATTACKERS = [c for c in CASES if c.student.startswith(("h44", "h45", "h46", "h47"))]
PROBE = next(c for c in CASES if c.student.startswith("h48"))
CLASSMATES = {"p1_probe": PROBE.write, "p2_probe": PROBE.write, "q1_honest": honest, "q2_honest": honest}


def _sandbox_processes() -> dict[int, str]:
    """pid -> command of every process of a sandbox user (the kit's uid pool, or `nobody`)."""
    pool = set(users.uid_range()) | {65534}
    out = subprocess.run(["ps", "-eo", "pid=,ppid=,uid=,args="], capture_output=True, text=True).stdout
    rows = [line.split(None, 3) + [""] for line in out.splitlines() if line.strip()]
    return {int(r[0]): f"{r[1]} {r[3]}" for r in rows if int(r[2]) in pool}


def _strays(before: set[int]) -> dict[int, str]:
    """New sandbox processes not under another live test run or nbgrader (the machine is shared:
    someone else's batch has sandbox users too)."""
    ps = subprocess.run(["ps", "-eo", "pid=,ppid=,args="], capture_output=True, text=True).stdout
    tree = {int(p): (int(pp), cmd) for p, pp, cmd in (line.split(None, 2) for line in ps.splitlines())}

    def others_run(pid: int) -> bool:
        while pid in tree and pid > 1:
            pid, _ = tree[pid]
            cmd = tree.get(pid, (0, ""))[1]
            if pid != os.getpid() and ("pytest" in cmd or "nbgrader" in cmd):
                return True
        return False

    return {p: c for p, c in _sandbox_processes().items() if p not in before and not others_run(p)}


def _graded_text(course, student) -> str:
    return (course / "autograded" / student / spec.ASSIGNMENT / NB).read_text()


def _outputs(course, student) -> str:
    """What the kernel printed, as text."""
    cells = json.loads(_graded_text(course, student))["cells"]
    outs = [o for c in cells for o in c.get("outputs", [])]
    return "".join("".join(o.get("text") or o.get("data", {}).get("text/plain") or "") for o in outs)


WORKERS = 2  # grading processes, round robin


@pytest.mark.parametrize("warm", [True, False], ids=["warm", "cold"])
def test_no_foothold_reaches_a_classmate(tmp_path_factory, new_course, warm):
    workers = WORKERS
    course = new_course(tmp_path_factory.mktemp(f"footholds_{'warm' if warm else 'cold'}_{workers}"))
    nbs = {
        "source": nbformat.read(course / "source" / spec.ASSIGNMENT / NB, 4),
        "release": nbformat.read(course / "release" / spec.ASSIGNMENT / NB, 4),
    }
    students = {c.student: c.write for c in ATTACKERS} | CLASSMATES
    for student, write in students.items():
        write(course / "submitted" / student / spec.ASSIGNMENT, nbs)
    before = set(_sandbox_processes())
    env = dict(os.environ, BACKPROP_NINJA_STATEMENT_SECONDS="3", BACKPROP_NINJA_MEMORY_MB="4096")
    cmd = [sys.executable, "-m", "grader", "grade", str(course), f"--workers={workers}", "--quiet"]
    cmd += ["--Execute.timeout=90", "--ReplayGrades.run_timeout=40"]
    cmd += [] if warm else ["--LimitedExecute.warm_kernels=False"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3000)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]

    done = {s: (course / "autograded" / s / spec.ASSIGNMENT / NB).stat().st_mtime for s in students}
    log = (course / "reports" / "autograde.log").read_text()
    for share in split(sorted(students), workers):  # the premise: each grading process had
        attackers = [s for s in share if s not in CLASSMATES]  # its attackers first, once
        first = max(done[s] for s in attackers) < min(done[s] for s in share if s in CLASSMATES)
        assert attackers and first and "trying them once more" not in log, (done, log[-3000:])
    full = {gid: spec.BY_GRADE_ID[gid].points for gid in ALL}
    scores = {s.student: s.by_grade_id for s in read_scores(f"sqlite:///{course / 'gradebook.db'}")}
    assert {s: scores.get(s) for s in students} == {s: full for s in students}
    for case in ATTACKERS:  # the attack was live: its own start read what it planted
        out = _outputs(course, case.student)
        tag = case.student.split("_")[0]
        assert f"{footholds.MARK} planted {tag}" in out, out[-2000:]
        check = out[out.index(f"self-check {tag}:") :][:600]
        assert re.search(rf"{footholds.MARK}(-RAN)?-{tag}", check), check
    for student in CLASSMATES:
        assert footholds.MARK not in _graded_text(course, student), student
    for student in ("p1_probe", "p2_probe"):
        out = _outputs(course, student)
        assert "0 of an attacker: []" in out, out[-2000:]
        pid = re.findall(r"probe: kernel pid (\d+)", out)
        assert pid and (pid[0] == "1") == warm, (pid, warm)  # a warm kernel is PID 1 of its own
    strays = {}
    for _ in range(30):  # a sandbox being torn down takes a moment
        if not (strays := _strays(before)):
            break
        subprocess.run(["sleep", "0.5"])
    assert not strays, strays
