"""grader/preprocessors/gradebook_rows.py in-process, on a real sqlite gradebook made by nbgrader's
own SaveCells from the release: the kit's OverwriteCellsOnce and SaveAutoGradesOnce leave the
same notebook, the same warnings and the same rows as nbgrader's OverwriteCells and
SaveAutoGrades, on a clean submission and on every way one can be edited; and they ask less."""

from __future__ import annotations

import copy
import logging
import shutil

import nbformat
import pytest
from nbgrader import api
from nbgrader.preprocessors import OverwriteCells, SaveAutoGrades, SaveCells
from sqlalchemy import event

from grader.exercise import spec
from grader.exercise.verdict import Verdict
from grader.preprocessors import OverwriteCellsOnce, SaveAutoGradesOnce
from grader.preprocessors.gradebook_rows import NotebookRows
from grader.preprocessors.replay_grades import verdict_outputs

from conftest import ROOT

# a new gradebook asks `alembic` (a process) for its version, once for the module
pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")]
RELEASE = ROOT / "release" / spec.ASSIGNMENT / f"{spec.NOTEBOOK}.ipynb"
STUDENT = "ann"


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """A gradebook with the assignment's cells (nbgrader's SaveCells) and ann's submission."""
    db = tmp_path_factory.mktemp("gradebook") / "gradebook.db"
    url = f"sqlite:///{db}"
    with api.Gradebook(url) as gb:
        gb.add_assignment(spec.ASSIGNMENT)
    SaveCells().preprocess(nbformat.read(RELEASE, 4), _resources(url))
    with api.Gradebook(url) as gb:
        gb.add_student(STUDENT)
        gb.add_submission(spec.ASSIGNMENT, STUDENT)
    return db


def _resources(url: str) -> dict:
    meta = {"notebook": spec.NOTEBOOK, "assignment": spec.ASSIGNMENT, "student": STUDENT, "db_url": url}
    return {"nbgrader": meta}


def _copy(template, tmp_path, name: str) -> str:
    shutil.copy(template, tmp_path / name)
    return f"sqlite:///{tmp_path / name}"


def _cells(nb, grade: bool):
    """The nbgrader cells that are graded (`grade` True) or not; cells nbgrader does not know, neither."""
    return [c for c in nb.cells if c.metadata.get("nbgrader", {"grade": None}).get("grade", False) is grade]


def _points(nb):
    _cells(nb, True)[0].metadata.nbgrader["points"] = 99


def _locked_edited(nb):
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("locked"))
    cell.source += "\nprint('mine')"


def _retyped(nb):
    cell = _cells(nb, True)[1]
    cell.cell_type = "markdown"
    cell.pop("outputs")
    cell.pop("execution_count")


def _unknown_id(nb):
    _cells(nb, True)[2].metadata.nbgrader["grade_id"] = "not_in_the_gradebook"


def _unlocked(nb):
    """A locked cell that is not graded (nbgrader takes every grade cell as locked)."""
    cell = next(c for c in _cells(nb, False) if c.metadata.nbgrader.get("locked"))
    cell.metadata.nbgrader["locked"] = False


EDITS = {
    "as released": lambda nb: None,
    "points": _points,
    "a locked cell edited": _locked_edited,
    "a grade cell retyped": _retyped,
    "an unknown grade id": _unknown_id,
    "a grade cell unlocked": _unlocked,
}


def _run(pre, nb, url: str, caplog) -> tuple[str, list[str]]:
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        out, _ = pre.preprocess(copy.deepcopy(nb), _resources(url))
    return nbformat.writes(out), [r.getMessage() for r in caplog.records]


@pytest.mark.parametrize("edit", list(EDITS))
def test_overwrite_cells_as_nbgrader(template, tmp_path, caplog, edit):
    nb = nbformat.read(RELEASE, 4)
    EDITS[edit](nb)
    ours = _run(OverwriteCellsOnce(), nb, _copy(template, tmp_path, "ours.db"), caplog)
    theirs = _run(OverwriteCells(), nb, _copy(template, tmp_path, "theirs.db"), caplog)
    assert ours == theirs
    if edit != "as released":
        assert ours[1], "the edit was noticed"


def test_missing_cells_added_back_as_nbgrader(template, tmp_path, caplog):
    """With add_missing_cells, a deleted grade cell comes back where nbgrader puts it."""
    nb = nbformat.read(RELEASE, 4)
    nb.cells.remove(_cells(nb, True)[7])
    runs = []
    for pre, db in ((OverwriteCellsOnce, "ours.db"), (OverwriteCells, "theirs.db")):
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            out, _ = pre(add_missing_cells=True).preprocess(
                copy.deepcopy(nb), _resources(_copy(template, tmp_path, db))
            )
        runs.append(([{k: v for k, v in c.items() if k != "id"} for c in out.cells], caplog.messages))
    assert runs[0] == runs[1]
    assert len(runs[0][0]) == len(nb.cells) + 1 and any("Missing grade cell" in m for m in runs[0][1])


def _graded_notebook():
    """The release with a verdict in each test cell: right, wrong, half and no score."""
    nb = nbformat.read(RELEASE, 4)
    for k, cell in enumerate(_cells(nb, True)):
        meta = cell.metadata.nbgrader
        score = [meta["points"], 0.0, meta["points"] / 2][k % 3]
        cell.outputs = verdict_outputs(Verdict(meta["grade_id"], score, meta["points"], ["why"]))
    _cells(nb, True)[4].outputs = [nbformat.v4.new_output("error", ename="E", evalue="", traceback=[])]
    _cells(nb, True)[5].outputs = []
    return nb


def _rows(url: str) -> dict:
    with api.Gradebook(url) as gb:
        sub = gb.find_submission_notebook(spec.NOTEBOOK, spec.ASSIGNMENT, STUDENT)
        grades = {g.name: (g.auto_score, g.needs_manual_grade, g.manual_score) for g in sub.grades}
        comments = {c.name: c.auto_comment for c in sub.comments}
    return {"grades": grades, "comments": comments}


@pytest.mark.parametrize("manual", [False, True])
def test_save_auto_grades_as_nbgrader(template, tmp_path, caplog, manual):
    ours_url, theirs_url = _copy(template, tmp_path, "ours.db"), _copy(template, tmp_path, "theirs.db")
    if manual:  # a TA's score stands, and the cell needs review
        for url in (ours_url, theirs_url):
            with api.Gradebook(url) as gb:
                grade = gb.find_grade(spec.GRADED[0].grade_id, spec.NOTEBOOK, spec.ASSIGNMENT, STUDENT)
                grade.manual_score = 0.5
                gb.db.commit()
    nb = _graded_notebook()
    assert _run(SaveAutoGradesOnce(), nb, ours_url, caplog) == _run(SaveAutoGrades(), nb, theirs_url, caplog)
    ours = _rows(ours_url)
    assert ours == _rows(theirs_url)
    scores = {v[0] for v in ours["grades"].values()}
    assert {0.0, 1.0, 0.5} <= scores and None not in scores, "right, wrong and half scores were written"
    assert ours["grades"][spec.GRADED[0].grade_id][1] is manual


def _statements(monkeypatch, url: str, pre) -> tuple[int, int]:
    """(SQL statements, commits) that `pre` sends, grading the notebook once (`pre` None: what
    opening a Gradebook alone sends)."""
    counts = [0, 0]
    engine_init = api.create_engine

    def counting_engine(*args, **kwargs):
        engine = engine_init(*args, **kwargs)
        event.listen(engine, "before_cursor_execute", lambda *a: counts.__setitem__(0, counts[0] + 1))
        event.listen(engine, "commit", lambda *a: counts.__setitem__(1, counts[1] + 1))
        return engine

    with monkeypatch.context() as mp:
        mp.setattr(api, "create_engine", counting_engine)
        if pre is None:
            api.Gradebook(url).close()
        else:
            pre.preprocess(_graded_notebook(), _resources(url))
    return counts[0], counts[1]


def test_fewer_statements_and_one_commit(template, tmp_path, monkeypatch):
    """What the module is for: nbgrader's ask once a cell and commit once a cell."""
    opening = _statements(monkeypatch, _copy(template, tmp_path, "o.db"), None)
    ours = _statements(monkeypatch, _copy(template, tmp_path, "a.db"), SaveAutoGradesOnce())
    theirs = _statements(monkeypatch, _copy(template, tmp_path, "b.db"), SaveAutoGrades())
    assert ours[1] == opening[1] + 1 and theirs[1] >= opening[1] + len(spec.GRADED)  # one a cell
    assert ours[0] - opening[0] < (theirs[0] - opening[0]) / 4
    ours = _statements(monkeypatch, _copy(template, tmp_path, "c.db"), OverwriteCellsOnce())
    theirs = _statements(monkeypatch, _copy(template, tmp_path, "d.db"), OverwriteCells())
    assert ours[0] - opening[0] < (theirs[0] - opening[0]) / 4


def test_other_notebooks_go_to_the_gradebook(template, tmp_path):
    """A lookup the rows do not cover is the gradebook's own: the same row, or the same error."""
    url = _copy(template, tmp_path, "e.db")
    gid = spec.GRADED[0].grade_id
    with api.Gradebook(url) as gb:
        rows = NotebookRows(gb, spec.NOTEBOOK, spec.ASSIGNMENT, STUDENT)
        assert rows.find_grade(gid, spec.NOTEBOOK, spec.ASSIGNMENT, STUDENT).name == gid
        with pytest.raises(api.MissingEntry):
            rows.find_grade(gid, spec.NOTEBOOK, spec.ASSIGNMENT, "someone else")
        with pytest.raises(api.MissingEntry):
            rows.find_source_cell(gid, "another notebook", spec.ASSIGNMENT)
        with pytest.raises(api.MissingEntry):
            rows.find_graded_cell("no such cell", spec.NOTEBOOK, spec.ASSIGNMENT)
        assert rows.find_student(STUDENT).id == STUDENT  # anything else: the gradebook's
