"""A course of the instructor's own, end to end with real nbgrader: `backprop-ninja init` makes
it outside the repository (course id set), a second assignment of the instructor's (hw0) goes
beside the kit's, both are released and graded in the one course. hw0 is graded exactly as a
plain nbgrader course grades it (the same scores, the same notebook shown), the kit's
assignment as the kit grades it."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import replace

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook
from nbgrader.api import Gradebook, MissingEntry

from grader.exercise import spec
from grader.incoming.submissions import write_submissions
from grader.reference.backprop_ninja.samples import DEMO

from conftest import VENV_BIN, nbgrader, shown_cells

HW0 = "hw0"
ANSWERS = {"s1_right": "answer = 6 * 7\nprint('my answer', answer)", "s2_wrong": "answer = 7"}


def _cell(cell, **meta):
    cell.metadata["nbgrader"] = {
        "schema_version": 3,
        "locked": False,
        "solution": False,
        "grade": False,
    } | meta
    return cell


def hw0_source() -> nbformat.NotebookNode:
    """A small assignment of the usual nbgrader kind: one answer cell, two graded tests."""
    return new_notebook(
        cells=[
            new_markdown_cell("# Homework 0\n\nSet `answer` to six times seven."),
            _cell(
                new_code_cell("### BEGIN SOLUTION\nanswer = 42\n### END SOLUTION"),
                grade_id="answer",
                solution=True,
            ),
            _cell(new_code_cell("assert answer > 10"), grade_id="big", grade=True, locked=True, points=1),
            _cell(
                new_code_cell(
                    "assert answer == 42\n### BEGIN HIDDEN TESTS\nassert answer % 7 == 0\n"
                    "### END HIDDEN TESTS"
                ),
                grade_id="exact",
                grade=True,
                locked=True,
                points=2,
            ),
        ],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    )


def _submit_hw0(course):
    release = nbformat.read(course / "release" / HW0 / f"{HW0}.ipynb", 4)
    for student, answer in ANSWERS.items():
        nb = nbformat.from_dict(release)
        nb.cells[1].source = answer
        folder = course / "submitted" / student / HW0
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / f"{HW0}.ipynb")


def _scores(course, assignment: str, notebook: str) -> dict:
    """student -> grade id -> score, from the gradebook through nbgrader's own API."""
    out = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for student in gb.students:
            try:
                nb = gb.find_submission_notebook(notebook, assignment, student.id)
            except MissingEntry:
                continue
            out[student.id] = {g.name: float(g.score or 0.0) for g in nb.grades}
    return out


@pytest.fixture(scope="module")
def courses(tmp_path_factory, names_txt):
    """(the course `init` made, with hw0 beside the kit's assignment; a plain nbgrader course
    with hw0 alone), both graded."""
    own = tmp_path_factory.mktemp("own") / "ml101"
    made = subprocess.run(
        [str(VENV_BIN / "backprop-ninja"), "init", str(own), "--course-id", "ml101"],
        env=dict(os.environ, NAMES_TXT=str(names_txt)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert made.returncode == 0, made.stdout + made.stderr
    plain = tmp_path_factory.mktemp("plain")
    (plain / "nbgrader_config.py").write_text(
        "c = get_config()  # noqa: F821\n"
        f"c.CourseDirectory.root = {str(plain)!r}\n"
        "c.CourseDirectory.course_id = 'plain'\n"
    )
    for course in (own, plain):
        (course / "source" / HW0).mkdir(parents=True)
        nbformat.write(hw0_source(), course / "source" / HW0 / f"{HW0}.ipynb")
        nbgrader(course, "generate_assignment", HW0, "--force")
        _submit_hw0(course)
        nbgrader(course, "autograde", HW0, "--force")
    nbgrader(own, "generate_assignment", spec.ASSIGNMENT, "--force")
    alice = next(s for s in DEMO if s.student == "alice")
    write_submissions([replace(alice, student="s1_right")], course=own)
    nbgrader(own, "autograde", spec.ASSIGNMENT, "--force")
    return own, plain, made.stdout


def test_init_makes_the_course_and_says_what_next(courses):
    own, _, said = courses
    assert "course id ml101" in said and f"nbgrader generate_assignment {spec.ASSIGNMENT}" in said
    assert (own / "exchange" / "ml101").is_dir()  # the course id is the exchange's, too
    assert not shutil.which("backprop-ninja", path=str(own))  # nothing of the kit's code copied in


def test_the_other_assignment_is_graded_as_plain_nbgrader_grades_it(courses):
    own, plain, _ = courses
    assert (
        _scores(own, HW0, HW0)
        == _scores(plain, HW0, HW0)
        == {
            "s1_right": {"big": 1.0, "exact": 2.0},
            "s2_wrong": {"big": 0.0, "exact": 0.0},
        }
    )
    for student in ANSWERS:  # a markdown cell nobody locked is the student's: the kit shows it as
        rel = f"autograded/{student}/{HW0}/{HW0}.ipynb"  # text, inert, in every assignment
        ours, theirs = shown_cells(own / rel), shown_cells(plain / rel)
        assert [c for c in ours if c[0] == "code"] == [c for c in theirs if c[0] == "code"], student
        assert ours[0][1] == "```\n" + theirs[0][1] + "\n```"
    assert not (own / "reports" / "replay").exists() or not list((own / "reports" / "replay").glob("s2_*"))


def test_the_kits_assignment_is_graded_by_the_kit_in_the_same_course(courses):
    own, _, _ = courses
    assert sum(_scores(own, spec.ASSIGNMENT, spec.NOTEBOOK)["s1_right"].values()) == spec.total_points()
    assert (own / "reports" / "replay" / "s1_right.json").is_file()  # the replay's record
