"""Bad input and attacks, through the kit's batch command (preflight, then the real
`nbgrader autograde` in the sandbox): each case gets its expected grade and message, the
honest submissions in the same batch keep their exact grades, nothing outside a
submission's scratch is changed, and a re-run or a resumed batch gives the same grades."""
from __future__ import annotations

import hashlib
import html
import json
import os
import re
import subprocess
import sys

import nbformat
import pytest

from conftest import ROOT, make_course, nbgrader
from grader import spec
from grader.report import read_scores
from grader.sandbox import bwrap_works
from hostile import ALL, CASES

pytestmark = pytest.mark.skipif(not bwrap_works(), reason="bubblewrap is needed (.ci/run installs it)")
FAST = ["--Execute.timeout=20", "--ReplayGrades.run_timeout=20"]


def _batch(course, *extra):
    env = dict(os.environ, BACKPROP_NINJA_STATEMENT_SECONDS="3", BACKPROP_NINJA_MEMORY_MB="4096")
    return subprocess.run([sys.executable, "-m", "grader.batch", str(course), *extra, *FAST], env=env,
                          capture_output=True, text=True, timeout=3600)


def _digest(path):
    h = hashlib.sha256()
    for p in sorted(path.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(path)).encode() + p.read_bytes())
    return h.hexdigest()


@pytest.fixture(scope="module")
def hostile_course(tmp_path_factory, names_txt):
    course = make_course(tmp_path_factory.mktemp("hostile"), names_txt)
    nbgrader(course, "generate_assignment", "backprop_ninja", "--force")
    nbs = {"source": nbformat.read(course / "source" / "backprop_ninja" / "backprop_ninja.ipynb", 4),
           "release": nbformat.read(course / "release" / "backprop_ninja" / "backprop_ninja.ipynb", 4)}
    for case in CASES:
        case.write(course / "submitted" / case.student / spec.ASSIGNMENT, nbs)
    before = {"source": _digest(course / "source"),
              "n01": _digest(course / "submitted" / "n01_honest")}
    proc = _batch(course)
    nbgrader(course, "generate_feedback", "backprop_ninja", "--force")
    return course, before, proc


def _scores(course):
    return {s.student: s.by_grade_id for s in read_scores(f"sqlite:///{course / 'gradebook.db'}")}


def _feedback_text(course, student):
    page = (course / "feedback" / student / spec.ASSIGNMENT / f"{spec.NOTEBOOK}.html").read_text()
    return html.unescape(re.sub(r"<[^>]+>", "", page)).replace("`", "")


def test_every_submission_was_graded(hostile_course):
    course, _, proc = hostile_course
    summary = json.loads((course / "reports" / "batch.json").read_text())
    assert {s for s, i in summary["students"].items() if i["graded"]} == {c.student for c in CASES}, proc.stdout
    assert proc.returncode == 0, proc.stdout[-3000:]


@pytest.mark.parametrize("case", CASES, ids=[c.student for c in CASES])
def test_grade_and_message(hostile_course, case):
    course, _, _ = hostile_course
    expected = {gid: 0.0 if gid in case.zeros else spec.BY_GRADE_ID[gid].points for gid in ALL}
    assert _scores(course)[case.student] == expected
    text = _feedback_text(course, case.student)
    for words in case.says:
        assert words.replace("`", "") in text, words
    record = json.loads((course / "reports" / "replay" / f"{case.student}.json").read_text())
    assert bool(record["suspicious"]) == case.suspicious, record["suspicious"]


def test_nothing_outside_the_scratch_changed(hostile_course):
    course, before, _ = hostile_course
    assert _digest(course / "source") == before["source"]
    assert _digest(course / "submitted" / "n01_honest") == before["n01"]
    text = _feedback_text(course, "h22_read_secrets")
    assert "BEGIN SOLUTION" not in text and "FOUND 0" in text


def test_rerun_and_resume_give_the_same_grades(hostile_course):
    course, _, _ = hostile_course
    first = _scores(course)
    graded = course / "autograded"
    kept = {s: (graded / s / spec.ASSIGNMENT / f"{spec.NOTEBOOK}.ipynb").stat().st_mtime_ns
            for s in ("n01_honest", "h04_nbformat3")}
    # an interrupted batch: one student's grading never finished
    (graded / "n02_honest_mistake" / spec.ASSIGNMENT / f"{spec.NOTEBOOK}.ipynb").unlink()
    proc = _batch(course)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert _scores(course) == first
    assert (graded / "n02_honest_mistake" / spec.ASSIGNMENT / f"{spec.NOTEBOOK}.ipynb").exists()
    for s, mtime in kept.items():  # finished ones were not graded again
        assert (graded / s / spec.ASSIGNMENT / f"{spec.NOTEBOOK}.ipynb").stat().st_mtime_ns == mtime
