"""Two batches at once: two throw-away courses graded at the same time by two
`backprop-ninja grade` processes, on one machine, by one user.

1. One snoops on the other. In course A a student's cell, in its sandboxed kernel, looks for
   every IPC socket it can find or guess and listens to them for 30 s. Course B's students have
   a distinctive string in a comment of an answer cell, which their kernels broadcast with the
   cell's code. A must hear nothing of B, and both courses grade exactly.
2. One forks until the limit (h19 of the hostile corpus) while the other grades: the other's
   kernels and replay must not be left without processes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import nbformat
import pytest

from grader.confine import bwrap_works
from grader.exercise import spec
from grader.reports.scores import read_scores

from conftest import nbgrader
from hostile import ALL, appended, with_cell
from hostile_payloads import snoop

pytestmark = pytest.mark.skipif(not bwrap_works(), reason="bubblewrap is needed (.ci/run installs it)")
DISTINCT = "B-ONLY-6d2f91c4-never-in-course-a"
LISTEN = 30
NB = f"{spec.NOTEBOOK}.ipynb"


def _course(tmp_path_factory, new_course, name, students):
    course = new_course(tmp_path_factory.mktemp(name))
    nbs = {
        "source": nbformat.read(course / "source" / spec.ASSIGNMENT / NB, 4),
        "release": nbformat.read(course / "release" / spec.ASSIGNMENT / NB, 4),
    }
    for student, write in students.items():
        write(course / "submitted" / student / spec.ASSIGNMENT, nbs)
    return course


def _start(course, timeout=90):
    env = dict(os.environ, BACKPROP_NINJA_STATEMENT_SECONDS="3", BACKPROP_NINJA_MEMORY_MB="4096")
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "grader",
            "grade",
            str(course),
            f"--Execute.timeout={timeout}",
            "--ReplayGrades.run_timeout=20",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_a_batch_hears_nothing_of_another(tmp_path_factory, new_course):
    a = _course(tmp_path_factory, new_course, "course_a", {"a1_snoop": with_cell("imports", snoop(LISTEN))})
    b = _course(
        tmp_path_factory,
        new_course,
        "course_b",
        {f"b{i}_honest": appended("ex1_solution", f"# {DISTINCT}") for i in (1, 2, 3, 4)},
    )

    batch_a = _start(a)
    time.sleep(2)
    batch_b = _start(b)
    out_b, _ = batch_b.communicate(timeout=1800)
    out_a, _ = batch_a.communicate(timeout=1800)
    assert batch_a.returncode == 0, out_a[-3000:]
    assert batch_b.returncode == 0, out_b[-3000:]

    full = {gid: spec.BY_GRADE_ID[gid].points for gid in ALL}
    for course, students in ((a, ["a1_snoop"]), (b, [f"b{i}_honest" for i in (1, 2, 3, 4)])):
        scores = {s.student: s.by_grade_id for s in read_scores(f"sqlite:///{course / 'gradebook.db'}")}
        assert {s: scores.get(s) for s in students} == {s: full for s in students}

    graded = (a / "autograded" / "a1_snoop" / spec.ASSIGNMENT / NB).read_text()
    # the snoop ran, and course B's kernels ran while it listened
    window = [float(x) for x in re.findall(r"SNOOP window (?:start|end) ([0-9.]+)", graded)]
    assert len(window) == 2, "the snooping cell did not run to its end"
    b_done = [
        (b / "autograded" / f"b{i}_honest" / spec.ASSIGNMENT / NB).stat().st_mtime for i in (1, 2, 3, 4)
    ]
    assert any(window[0] < t < window[1] for t in b_done), (window, b_done)
    # and heard nothing of them
    assert DISTINCT not in graded
    nbgrader(a, "generate_feedback", spec.ASSIGNMENT, "--force")
    for path in (a / "feedback").rglob("*"):
        if path.is_file():
            assert DISTINCT.encode() not in path.read_bytes(), path
    heard = re.findall(r"SNOOP heard (\d+) messages", graded)
    print(
        "\nsnoop:",
        re.findall(r"SNOOP (?:lists|cannot list)[^\\]*", graded)[:5],
        "heard",
        heard,
        json.dumps({"window": window, "b_done": b_done}),
    )


FORK_BOMB = """\
import os, posix, time
try:
    while True:
        if os.fork() == 0:
            time.sleep(60)
            posix._exit(0)
except OSError as e:
    print('forked until', type(e).__name__, 'holding from', time.time())
    time.sleep(60)  # and holds every process there is while the other batch grades"""


def test_a_fork_bomb_in_one_batch_costs_the_other_nothing(tmp_path_factory, new_course):
    """Every sandbox runs as the same user, and the process limit counts a user's processes on
    the whole machine: a submission that forks until the limit (h19 of the hostile corpus) must
    not leave another batch's kernels and replay without processes."""
    a = _course(
        tmp_path_factory, new_course, "course_forks", {"a0_forks": with_cell("ex1_solution", FORK_BOMB)}
    )
    b = _course(
        tmp_path_factory,
        new_course,
        "course_calm",
        {f"b{i}_honest": appended("ex1_solution", "# calm") for i in (1, 2, 3)},
    )
    batch_a = _start(a, timeout=40)
    time.sleep(8)  # A's kernel is forking when B's batch starts
    b_started = time.time()
    batch_b = _start(b)
    out_b, _ = batch_b.communicate(timeout=1800)
    out_a, _ = batch_a.communicate(timeout=1800)
    assert batch_a.returncode == 0, out_a[-3000:]
    assert batch_b.returncode == 0, out_b[-3000:]
    # the bomb used up its processes and held them (until its cell's 40 s were up) while B graded
    graded = (a / "autograded" / "a0_forks" / spec.ASSIGNMENT / NB).read_text()
    held = [float(t) for t in re.findall(r"forked until \w+ holding from ([0-9.]+)", graded)]
    assert held, "the fork bomb did not reach its limit"
    b_done = max(
        (b / "autograded" / f"b{i}_honest" / spec.ASSIGNMENT / NB).stat().st_mtime for i in (1, 2, 3)
    )
    assert b_started < held[0] + 25 and b_done > held[0], (held, b_started, b_done)
    full = {gid: spec.BY_GRADE_ID[gid].points for gid in ALL}
    for course, students in ((a, ["a0_forks"]), (b, [f"b{i}_honest" for i in (1, 2, 3)])):
        scores = {s.student: s.by_grade_id for s in read_scores(f"sqlite:///{course / 'gradebook.db'}")}
        wrong = {s: sum(scores.get(s, {}).values()) for s in students if scores.get(s) != full}
        assert not wrong, (
            wrong,
            [
                json.loads((course / "reports" / "replay" / f"{s}.json").read_text())["problems"]
                for s in wrong
                if (course / "reports" / "replay" / f"{s}.json").exists()
            ],
        )
