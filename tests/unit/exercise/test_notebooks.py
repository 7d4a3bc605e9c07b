"""The committed notebooks against the exercise's definition (grader/exercise/spec.py): the
release holds stubs, no outputs and locked cells; the source's graded cells are the spec's,
each grading its own grade id. In-process: no nbgrader command (tests/e2e/test_release.py
generates the release and runs nbgrader's validator)."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat

from grader.exercise import spec

from conftest import ROOT

NB = f"{spec.ASSIGNMENT}/{spec.NOTEBOOK}.ipynb"


def _cells(path: Path):
    return nbformat.read(path, 4).cells


def test_release_has_stubs_no_outputs_and_locked_cells():
    cells = _cells(ROOT / "release" / NB)
    answers = [c for c in cells if c.metadata.nbgrader.get("solution")]
    assert [c.metadata.nbgrader.grade_id for c in answers] == list(spec.ANSWER_CELLS.values())
    assert all("# YOUR CODE HERE" in c.source and "raise NotImplementedError()" in c.source for c in answers)
    assert all(not c.outputs and c.execution_count is None for c in cells if c.cell_type == "code")
    assert all(c.metadata.nbgrader.get("locked") for c in cells if not c.metadata.nbgrader.get("solution"))


def test_grade_cells_follow_the_spec():
    cells = _cells(ROOT / "source" / NB)
    graded = {
        c.metadata.nbgrader.grade_id: c.metadata.nbgrader.points
        for c in cells
        if c.metadata.nbgrader.get("grade")
    }
    assert graded == {g.grade_id: g.points for g in spec.GRADED}
    assert len([g for g in spec.GRADIENTS if g.exercise == 1]) == 26
    # each test cell grades exactly its own grade id
    for c in cells:
        if c.metadata.nbgrader.get("grade"):
            assert re.findall(r'grade\("([^"]+)"', c.source) == [c.metadata.nbgrader.grade_id]
