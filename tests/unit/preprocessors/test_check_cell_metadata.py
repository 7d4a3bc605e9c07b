"""grader/preprocessors/check_cell_metadata.py in-process: on the release's own notebook and on
each way its metadata can be broken, the kit's check raises exactly what nbgrader's raises."""

from __future__ import annotations

import copy

import nbformat
import pytest
from nbgrader.nbgraderformat import MetadataValidator as NbgraderValidator
from nbgrader.nbgraderformat import ValidationError
from nbgrader.preprocessors import CheckCellMetadata as NbgraderCheck

from grader.exercise import spec
from grader.preprocessors import CheckCellMetadata
from grader.preprocessors.check_cell_metadata import MetadataValidator

from conftest import ROOT

SOURCE = ROOT / "source" / spec.ASSIGNMENT / f"{spec.NOTEBOOK}.ipynb"


@pytest.fixture(scope="module")
def notebook():
    return nbformat.read(SOURCE, as_version=4)


def _graded(nb):
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade"))


def _set(key, value):
    def edit(nb):
        _graded(nb).metadata["nbgrader"][key] = value

    return edit


def _drop(key):
    return lambda nb: _graded(nb).metadata["nbgrader"].pop(key)


def _duplicate_id(nb):
    graded = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]
    graded[1].metadata["nbgrader"]["grade_id"] = graded[0].metadata["nbgrader"]["grade_id"]


def _markdown_grade(nb):
    cell = _graded(nb)
    cell.cell_type = "markdown"
    cell.metadata["nbgrader"]["solution"] = False


BROKEN = {
    "points as text": _set("points", "two"),
    "an unknown key": _set("colour", "red"),
    "no grade_id": _drop("grade_id"),
    "an empty grade_id": _set("grade_id", ""),
    "no points": _drop("points"),
    "an old schema": _set("schema_version", 1),
    "a newer schema": _set("schema_version", 99),
    "grade not a boolean": _set("grade", "yes"),
    "a duplicate grade_id": _duplicate_id,
    "a markdown grade cell that is not a solution": _markdown_grade,
}


def _raised(validator, nb):
    try:
        validator.validate_nb(nb)
    except Exception as e:  # noqa: BLE001 - what is raised is what is compared
        return type(e), str(e)
    return None


def test_the_release_notebook_passes_both(notebook):
    assert _raised(NbgraderValidator(), notebook) is None
    assert _raised(MetadataValidator(), notebook) is None


@pytest.mark.parametrize("how", BROKEN, ids=list(BROKEN))
def test_a_broken_notebook_fails_as_in_nbgrader(notebook, how):
    nb = copy.deepcopy(notebook)
    BROKEN[how](nb)
    theirs = _raised(NbgraderValidator(), nb)
    assert theirs is not None, how  # each case is one nbgrader refuses
    assert _raised(MetadataValidator(), nb) == theirs


def test_the_preprocessor_refuses_with_nbgraders_message(notebook):
    nb = copy.deepcopy(notebook)
    _drop("grade_id")(nb)
    with pytest.raises(ValidationError) as ours:
        CheckCellMetadata().preprocess(nb, {})
    with pytest.raises(ValidationError) as theirs:
        NbgraderCheck().preprocess(copy.deepcopy(nb), {})
    assert str(ours.value) == str(theirs.value)
    assert str(ours.value) == "Notebook failed to validate; the nbgrader metadata may be corrupted."
    assert CheckCellMetadata().preprocess(copy.deepcopy(notebook), {})[0] == notebook
