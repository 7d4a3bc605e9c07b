"""nbgrader's OverwriteCells and SaveAutoGrades, each asking the gradebook once a notebook.

nbgrader's own look up every graded cell with a query of up to seven joins, and SaveAutoGrades
commits after each cell: about 80 queries and 42 commits a submission of this assignment
(0.1 CPU-s, and a writer's lock taken 42 times). Here each preprocessor reads the notebook's
rows at once and the per-cell code stays nbgrader's: it is handed a gradebook whose lookups
answer from those rows, and whose commits wait for the one at the end. The same rows are
written with the same values; a notebook's grades land together or not at all.
"""

from __future__ import annotations

from contextlib import contextmanager
from functools import cached_property

from nbconvert.exporters.exporter import ResourcesDict
from nbformat.notebooknode import NotebookNode
from nbgrader import api
from nbgrader.preprocessors import NbGraderPreprocessor, OverwriteCells, SaveAutoGrades
from sqlalchemy.orm import joinedload


def _by_name(rows, first: type) -> dict:
    """name -> row, a row whose cell is of kind `first` before any other (nbgrader's lookups try
    a grade or solution cell of that name before a task cell)."""
    out: dict = {}
    for row, cell in rows:
        if isinstance(cell, first) or cell.name not in out:
            out[cell.name] = row
    return out


class NotebookRows:
    """A gradebook as nbgrader's per-cell code asks it, for one notebook of one assignment (and
    one student's submission of it): a lookup answers from that notebook's rows of its kind,
    read at the first; any other call, or a lookup of another notebook, goes to the gradebook
    itself. `db.commit()` waits for `commit()`."""

    def __init__(self, gradebook: api.Gradebook, notebook: str, assignment: str, student: str | None = None):
        self._gradebook, self._key, self._student = gradebook, (notebook, assignment), student
        self.db = _CommitLater(gradebook.db)

    def commit(self) -> None:
        self._gradebook.db.commit()

    def __getattr__(self, name: str):
        return getattr(self._gradebook, name)

    @cached_property
    def _notebook(self):
        return self._gradebook.find_notebook(*self._key)

    @cached_property
    def _source(self) -> dict:
        return {c.name: c for c in self._notebook.source_cells}

    @cached_property
    def _graded(self) -> dict:
        # each kind by a query of its own, so that its own columns come with it
        query, nb_id = self._gradebook.db.query, self._notebook.id
        cells = []
        for kind in (api.TaskCell, api.GradeCell):
            cells += query(kind).filter_by(notebook_id=nb_id)
        return _by_name(((c, c) for c in cells), api.GradeCell)

    def _submitted(self, kind):
        """The student's rows of `kind` (Grade, Comment), each with its cell, in one query."""
        sub = self._gradebook.find_submission_notebook(*self._key, self._student)
        query = self._gradebook.db.query(kind).filter(kind.notebook_id == sub.id)
        return ((row, row.cell) for row in query.options(joinedload(kind.cell)))

    @cached_property
    def _grades(self) -> dict:
        return _by_name(self._submitted(api.Grade), api.GradeCell)

    @cached_property
    def _comments(self) -> dict:
        return _by_name(self._submitted(api.Comment), api.SolutionCell)

    def _row(self, kind: str, what: str, name: str, notebook: str, assignment: str, *student):
        if (notebook, assignment) != self._key or student[:1] not in ((), (self._student,)):
            return getattr(self._gradebook, what)(name, notebook, assignment, *student)
        try:
            return getattr(self, kind)[name]
        except KeyError:
            why = f"No such {what.removeprefix('find_')}: {assignment}/{notebook}/{name}"
            raise api.MissingEntry(why) from None

    def find_source_cell(self, name: str, notebook: str, assignment: str):
        return self._row("_source", "find_source_cell", name, notebook, assignment)

    def find_graded_cell(self, name: str, notebook: str, assignment: str):
        return self._row("_graded", "find_graded_cell", name, notebook, assignment)

    def find_grade(self, name: str, notebook: str, assignment: str, student: str):
        return self._row("_grades", "find_grade", name, notebook, assignment, student)

    def find_comment(self, name: str, notebook: str, assignment: str, student: str):
        return self._row("_comments", "find_comment", name, notebook, assignment, student)


class _CommitLater:
    """The session, but for commit: the preprocessor commits once, after its last cell."""

    def __init__(self, session):
        self._session = session

    def commit(self) -> None:
        pass

    def __getattr__(self, name: str):
        return getattr(self._session, name)


@contextmanager
def _rows_of(pre: NbGraderPreprocessor, resources: ResourcesDict, student: str | None):
    """`pre.gradebook` a NotebookRows of the notebook `resources` names, committed once at the end."""
    meta = resources["nbgrader"]
    pre.notebook_id, pre.assignment_id, pre.db_url = meta["notebook"], meta["assignment"], meta["db_url"]
    with api.Gradebook(pre.db_url) as gradebook:
        pre.gradebook = NotebookRows(gradebook, pre.notebook_id, pre.assignment_id, student)
        yield
        pre.gradebook.commit()


class OverwriteCellsOnce(OverwriteCells):
    """nbgrader's OverwriteCells: the assignment's cells read once, not twice a graded cell."""

    def preprocess(self, nb: NotebookNode, resources: ResourcesDict) -> tuple[NotebookNode, ResourcesDict]:
        with _rows_of(self, resources, None):
            nb, resources = NbGraderPreprocessor.preprocess(self, nb, resources)  # nbgrader's cell loop
            if self.add_missing_cells:
                nb, resources = self.add_missing_grade_cells(nb, resources)
                nb, resources = self.add_missing_task_cells(nb, resources)
        return nb, resources


class SaveAutoGradesOnce(SaveAutoGrades):
    """nbgrader's SaveAutoGrades: the submission's grades and comments read once, one commit."""

    def preprocess(self, nb: NotebookNode, resources: ResourcesDict) -> tuple[NotebookNode, ResourcesDict]:
        self.student_id = resources["nbgrader"]["student"]
        with _rows_of(self, resources, self.student_id):
            return NbGraderPreprocessor.preprocess(self, nb, resources)  # nbgrader's cell loop
