"""grader/preprocessors/scope.py in-process: the kit's grading acts on its own assignment only.
Another assignment of the course (no names.txt, no kit notebook in its source folder) passes
through the rebuild, the replay and the feedback table untouched, as plain nbgrader has it."""

from __future__ import annotations

import copy

import nbformat
from nbformat.v4 import new_code_cell, new_notebook
from traitlets.config import Config

from grader.exercise import spec
from grader.preprocessors import FeedbackSummary, RebuildFromSource, ReplayGrades
from grader.preprocessors.scope import kit_assignment

OTHER = {"nbgrader": {"assignment": "hw0", "notebook": "hw0", "student": "s1"}}


def _graded(source: str):
    cell = new_code_cell(source, outputs=[nbformat.v4.new_output("stream", name="stdout", text="ok\n")])
    meta = {"grade": True, "grade_id": "hw0_test", "points": 1, "solution": False, "locked": True}
    cell.metadata["nbgrader"] = dict(meta, schema_version=3)
    return cell


def _course(tmp_path) -> Config:
    (tmp_path / "source" / "hw0").mkdir(parents=True)  # no notebook of the kit's, no names.txt
    c = Config()
    c.CourseDirectory.root = str(tmp_path)
    return c


def test_only_the_kits_assignment_is_the_kits():
    assert kit_assignment({"nbgrader": {"assignment": spec.ASSIGNMENT}})
    assert not kit_assignment(OTHER) and not kit_assignment(None) and not kit_assignment({})


def test_another_assignment_passes_through_untouched(tmp_path):
    c = _course(tmp_path)
    nb = new_notebook(cells=[_graded("assert 1 + 1 == 2\nprint('ok')")])
    before = copy.deepcopy(nb)
    for preprocessor in (RebuildFromSource, ReplayGrades, FeedbackSummary):
        out, resources = preprocessor(config=c).preprocess(nb, copy.deepcopy(OTHER))
        assert out == before, preprocessor.__name__
        assert set(resources) == {"nbgrader"}, preprocessor.__name__
    assert not (tmp_path / "reports").exists()  # no replay record either
