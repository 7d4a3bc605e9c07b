"""One submission through the zip's course, for the exercise the zip names: its settings read,
the exercise found in the course (Backprop Ninja by default, a written one from its source
notebook), and the submission put where nbgrader looks for that exercise, its scores and its
judge's record read from that exercise's places. nbgrader itself is stood in for here
(tests/e2e/test_gradescope.py runs it)."""

from __future__ import annotations

import json
import subprocess

import nbformat
import pytest
from unit.gradescope.written_course import add_written

from grader.exercise import spec
from grader.gradescope import course as course_mod
from grader.reports.scores import StudentScores
from grader.settings import report_dir

from tiny_exercise import TINY


def test_settings_that_cannot_be_read_are_none(tmp_path):
    assert course_mod.read_settings(tmp_path) == {}
    (tmp_path / "gradescope.json").write_text("[1, 2]")
    assert course_mod.read_settings(tmp_path) == {}
    (tmp_path / "gradescope.json").write_text('{"assignment": "tiny"}')
    assert course_mod.read_settings(tmp_path) == {"assignment": "tiny"}


def test_a_zip_that_names_no_assignment_grades_backprop_ninja(tmp_path):
    assert course_mod.zip_exercise(tmp_path, {}) is spec.NINJA
    assert course_mod.zip_exercise(tmp_path, {"assignment": spec.ASSIGNMENT}) is spec.NINJA


def test_a_written_exercise_is_found_in_the_zips_course(tmp_path):
    add_written(tmp_path, TINY)
    exercise = course_mod.zip_exercise(tmp_path, {"assignment": "tiny"})
    assert (exercise.assignment, exercise.notebook, exercise.definition.title) == ("tiny", "tiny", TINY.title)
    with pytest.raises(RuntimeError, match="hw9 is not an exercise the kit grades"):
        course_mod.zip_exercise(tmp_path, {"assignment": "hw9"})


@pytest.fixture
def template(tmp_path):
    """A prepared course of the written exercise (a release, a gradebook), configured plainly."""
    course = tmp_path / "template"
    course.mkdir()
    (course / "nbgrader_config.py").write_text("c = get_config()  # noqa: F821\n")
    add_written(course, TINY)
    (course / "release" / "tiny").mkdir(parents=True)
    nbformat.write(nbformat.v4.new_notebook(), course / "release" / "tiny" / "tiny.ipynb")
    (course / "gradebook.db").write_text("")
    return course


def test_a_written_exercise_is_graded_as_its_own_assignment(template, tmp_path, monkeypatch):
    exercise = course_mod.zip_exercise(template, {"assignment": "tiny"})
    seen = {}

    def nbgrader(course, *args, log=None):  # the judge's record where the written exercise keeps it
        seen["args"], seen["submitted"] = (
            args,
            sorted(p.name for p in (course / "submitted" / "42").iterdir()),
        )
        records = report_dir(course) / "replay-tiny"
        records.mkdir(parents=True)
        (records / "42.json").write_text(json.dumps({"seed": 5, "verdicts": {}}))
        return subprocess.CompletedProcess(["nbgrader", *args], 0, "", "")

    def read_scores(db_url, graded):
        seen["graded"] = graded
        return [StudentScores("42", {"ex1_dW": 1.0}, graded)]

    monkeypatch.setattr(course_mod, "nbgrader", nbgrader)
    monkeypatch.setattr(course_mod, "read_scores", read_scores)
    submitted = tmp_path / "My work.ipynb"
    nbformat.write(nbformat.v4.new_notebook(), submitted)
    done = course_mod.autograde(
        template=template, work=tmp_path / "work", student="42", notebook=submitted, exercise=exercise
    )
    assert seen["args"][:2] == ("autograde", "tiny") and "--student=42" in seen["args"]
    assert seen["submitted"] == ["tiny"] and seen["graded"] is exercise
    assert (tmp_path / "work" / "submitted" / "42" / "tiny" / "tiny.ipynb").is_file()
    assert (done.scores, done.record["seed"], done.notes) == ({"ex1_dW": 1.0}, 5, [])
    assert not (report_dir(tmp_path / "work") / "intake").exists()  # Backprop Ninja's rebuild's only
