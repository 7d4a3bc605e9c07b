"""grader/preprocessors/show_only.py: which cells the grading kernel leaves unrun."""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell

from grader.exercise import spec
from grader.preprocessors.show_only import show_only

ROOT = Path(__file__).resolve().parents[3]


def _cell(grade=False, solution=False, kind="code"):
    cell = new_code_cell("pass") if kind == "code" else new_markdown_cell("text")
    cell.metadata["nbgrader"] = {"grade": grade, "solution": solution, "locked": not solution}
    return cell


def test_code_cells_after_the_last_graded_or_answer_cell():
    cells = [_cell(), _cell(solution=True), _cell(), _cell(grade=True), _cell(), _cell(kind="md"), _cell()]
    assert show_only(cells) == {4, 6}


def test_an_answer_cell_last_keeps_everything_running():
    assert show_only([_cell(), _cell(grade=True), _cell(solution=True)]) == set()


def test_a_notebook_without_graded_cells_runs_whole():
    assert show_only([new_code_cell("pass"), new_code_cell("pass")]) == set()


def test_a_students_added_cell_at_the_end_is_show_only_too():
    assert show_only([_cell(solution=True), _cell(grade=True), new_code_cell("print(1)")]) == {2}


def test_in_the_lecture_notebook_only_what_shows_the_trained_net():
    """Calibration, the losses on whole splits and the samples; the training loop still runs
    (its graded cells follow it), capped to a few steps under the grader."""
    nb = nbformat.read(ROOT / "source" / spec.ASSIGNMENT / f"{spec.NOTEBOOK}.ipynb", 4)
    ids = {nb.cells[i].metadata["nbgrader"]["grade_id"] for i in show_only(nb.cells)}
    assert ids == {"ex4_calibrate", "ex4_eval", "ex4_sample"}
    assert ids < spec.KERNEL_ONLY_CELLS  # the replay never ran them either
