"""Which cells of a notebook being graded only show something: the code cells after its last
graded or answer cell. Nothing in them can change a grade (nbgrader has run every test before
them, and the replay re-runs the answers on its own), and under the grader what they show is of a
net trained for a few steps: the lecture's calibration, its losses on whole splits, its samples.
LimitedExecute leaves them unrun, with NOTE as their output, on both its warm and cold paths."""

from __future__ import annotations

from nbformat.notebooknode import NotebookNode, from_dict
from nbgrader.utils import is_grade, is_solution

NOTE = (
    "[not run by the autograder: nothing after the last graded cell changes a grade, and here it "
    "would only show a net trained for a few steps. Run it in your own notebook.]\n"
)


def show_only(cells: list[NotebookNode]) -> set[int]:
    """The indices of the code cells after the last cell that is graded or an answer."""
    last = max((i for i, cell in enumerate(cells) if is_grade(cell) or is_solution(cell)), default=None)
    if last is None:  # not an nbgrader notebook: everything runs
        return set()
    return {i for i, cell in enumerate(cells) if i > last and cell.cell_type == "code"}


def note() -> NotebookNode:
    return from_dict({"output_type": "stream", "name": "stdout", "text": NOTE})
