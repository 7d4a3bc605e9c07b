"""End to end with real nbgrader: the demo class autograded (the session's graded_demo), every
gradient's score read back from the gradebook, the feedback and the CSV export; and the same
class graded by the parallel batch gives the same grades and notebooks."""

from __future__ import annotations

import csv

import pytest
from nbgrader.api import Gradebook

from grader.exercise import spec
from grader.reference.backprop_ninja.samples import DEMO
from grader.reports.report import table
from grader.reports.scores import read_scores

from conftest import copy_course, nbgrader, shown_cells
from corpus import EXPECTED_ZEROS

EX1 = [g.grade_id for g in spec.GRADIENTS if g.exercise == 1]
ALL = [g.grade_id for g in spec.GRADED]


@pytest.fixture(scope="module")
def graded_course(tmp_path_factory, graded_demo):
    """The demo class as plain `nbgrader autograde` graded it (the session's graded_demo, a copy:
    one grading of the class serves every module that reads it), exported to CSV here."""
    course = copy_course(graded_demo.course, tmp_path_factory.mktemp("autograded"))
    nbgrader(course, "export", "--to", "grades.csv")
    return course


def test_every_gradient_scores_as_expected(graded_course):
    scores = {s.student: s.by_grade_id for s in read_scores(f"sqlite:///{graded_course / 'gradebook.db'}")}
    assert sorted(scores) == sorted(s.student for s in DEMO)
    for student, zeros in EXPECTED_ZEROS.items():
        expected = {gid: 0.0 if gid in zeros else spec.BY_GRADE_ID[gid].points for gid in ALL}
        assert scores[student] == expected, student


def test_gradebook_needs_no_manual_grading(graded_course):
    with Gradebook(f"sqlite:///{graded_course / 'gradebook.db'}") as gb:
        nb = gb.find_submission_notebook(spec.NOTEBOOK, spec.ASSIGNMENT, "alice")
        assert not nb.needs_manual_grade
        assert nb.score == spec.total_points()


def test_feedback_shows_the_verdicts(graded_course):
    html = (graded_course / "feedback" / "alice" / spec.ASSIGNMENT / f"{spec.NOTEBOOK}.html").read_text()
    assert "PASS ex1_dlogprobs: 1/1 points" in html
    assert "accepted for (1, 64): only size-1 dims differ" in html  # dbnmeani's keepdim
    assert "mathematically zero" in html  # db1, dlogit_maxes
    html = (graded_course / "feedback" / "carol" / spec.ASSIGNMENT / f"{spec.NOTEBOOK}.html").read_text()
    assert "FAIL ex1_dcounts: 0/1 points" in html
    assert "PASS ex1_dnorm_logits: 1/1 points" in html
    html = (graded_course / "feedback" / "dave" / spec.ASSIGNMENT / f"{spec.NOTEBOOK}.html").read_text()
    assert "wrong shape (27, 64), expected (64, 27)" in html and "transposed" in html
    html = (graded_course / "feedback" / "erin" / spec.ASSIGNMENT / f"{spec.NOTEBOOK}.html").read_text()
    assert "dlogprobs is not defined" in html
    assert "NotImplementedError" in html


def test_csv_export(graded_course):
    with open(graded_course / "grades.csv", newline="") as f:
        rows = {r["student_id"]: r for r in csv.DictReader(f)}
    total = spec.total_points()
    assert float(rows["alice"]["score"]) == total
    assert float(rows["alice"]["max_score"]) == total
    for student, zeros in EXPECTED_ZEROS.items():
        lost = sum(spec.BY_GRADE_ID[g].points for g in zeros)
        assert float(rows[student]["score"]) == total - lost, student


def test_report_table(graded_course):
    text = table(read_scores(f"sqlite:///{graded_course / 'gradebook.db'}"))
    lines = text.splitlines()
    assert lines[0].split() == [
        "student",
        "ex1",
        "/26",
        "ex2",
        "/2",
        "ex3",
        "/2",
        "ex4",
        "/8",
        "total",
        "/38",
    ]
    assert lines[2].split() == ["alice", "26", "2", "2", "8", "38"]
    assert lines[3].split() == ["bob", "25", "2", "0", "8", "35"]
    assert lines[-1].split() == ["erin", "0", "0", "0", "0", "0"]


# ---------------------------------------------------------------- the parallel batch
@pytest.fixture(scope="module")
def batch_course(tmp_path_factory, names_txt, graded_course):
    """The same class graded by `backprop-ninja grade --workers 2`, in a course of its own."""
    import shutil
    import subprocess
    import sys

    from conftest import make_course

    course = make_course(tmp_path_factory.mktemp("batch"), names_txt)
    shutil.copytree(graded_course / "release", course / "release")
    shutil.copytree(graded_course / "submitted", course / "submitted")
    shutil.copy(graded_course / "gradebook.db", course / "gradebook.db")  # assignment and students known
    proc = subprocess.run(
        [sys.executable, "-m", "grader", "grade", str(course), "--workers", "2", "--quiet", "--force"],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return course, proc


def test_parallel_batch_gives_nbgraders_grades(graded_course, batch_course):
    course, _ = batch_course
    db = lambda c: f"sqlite:///{c / 'gradebook.db'}"  # noqa: E731
    assert {s.student: s.by_grade_id for s in read_scores(db(course))} == {
        s.student: s.by_grade_id for s in read_scores(db(graded_course))
    }


def test_parallel_batch_gives_nbgraders_notebooks(graded_course, batch_course):
    course, _ = batch_course
    for sample in DEMO:
        rel = f"autograded/{sample.student}/{spec.ASSIGNMENT}/{spec.NOTEBOOK}.ipynb"
        assert shown_cells(course / rel) == shown_cells(graded_course / rel), sample.student


def test_parallel_batch_reports_each_submission(batch_course):
    course, proc = batch_course
    log = (course / "reports" / "autograde.log").read_text()
    for sample in DEMO:
        assert f"graded {sample.student} (" in log
        assert f"{sample.student}: graded" in proc.stdout
    assert "===== nbgrader output: worker-1-1.log =====" in log  # two workers' own logs follow
    assert "database is locked" not in log  # SQLite, two writers
