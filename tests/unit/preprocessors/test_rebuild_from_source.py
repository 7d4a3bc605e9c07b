"""grader/preprocessors/rebuild_from_source.py in-process, on a tiny notebook built here:
the instructor's notebook is what runs, with the student's answers put in their places."""

from __future__ import annotations

import copy
import os

import nbformat
import pytest
from nbconvert.exporters.exporter import ResourcesDict
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook
from nbgrader.preprocessors import ClearSolutions, DeduplicateIds
from traitlets.config import Config

from grader.exercise import spec
from grader.exercise.cells import nbgrader_meta
from grader.incoming import intake
from grader.preprocessors.rebuild_from_source import NOTE_MARK, RebuildFromSource, _stubs, rebuild
from grader.preprocessors.scope import instructor_notebook

from conftest import ROOT

STUB = "# YOUR CODE HERE\nraise NotImplementedError()"


def _meta(cell, grade_id, *, solution=False, grade=False, locked=False, points=0.0):
    cell.metadata["nbgrader"] = {
        "grade_id": grade_id,
        "solution": solution,
        "grade": grade,
        "locked": locked,
        "points": points,
        "task": False,
        "schema_version": 3,
    }
    return cell


def source_nb():
    """intro (locked markdown), ans (answer), test_ans (graded test)."""
    return new_notebook(
        cells=[
            _meta(new_markdown_cell("# Intro"), "intro", locked=True),
            _meta(new_code_cell("### BEGIN SOLUTION\nx = 42\n### END SOLUTION"), "ans", solution=True),
            _meta(new_code_cell("assert x == 42"), "test_ans", grade=True, locked=True, points=1.0),
        ]
    )


def release_nb():
    """What the student got: the answer cell holds the stub."""
    nb = source_nb()
    nb.cells[1].source = STUB
    return nb


def answered(code="x = 42"):
    nb = release_nb()
    nb.cells[1].source = code
    return nb


def gids(cells):
    return [c.metadata.get("nbgrader", {}).get("grade_id") for c in getattr(cells, "cells", cells)]


def body(nb):
    """The cells without the kit's note."""
    return [c for c in nb.cells if not c.metadata.get(NOTE_MARK)]


def test_unchanged_submission_has_no_note():
    out, notes = rebuild(answered(), source_nb())
    assert notes == [] and gids(out) == ["intro", "ans", "test_ans"]


def test_answer_is_put_into_the_instructor_cell():
    out, _ = rebuild(answered("x = 6 * 7"), source_nb())
    assert body(out)[1].source == "x = 6 * 7"


def test_deleted_answer_cell_gets_the_release_stub():
    student = answered()
    del student.cells[1]
    out, _ = rebuild(student, source_nb())
    assert body(out)[1].source.strip() == STUB


def test_deleted_answer_cell_is_noted():
    student = answered()
    del student.cells[1]
    _, notes = rebuild(student, source_nb())
    assert any("`ans` was missing" in n for n in notes)


def test_note_cell_carries_note_mark_and_comes_first():
    student = answered()
    del student.cells[1]
    out, _ = rebuild(student, source_nb())
    assert out.cells[0].cell_type == "markdown" and out.cells[0].metadata.get(NOTE_MARK) is True


def test_note_cell_says_what_was_changed():
    student = answered()
    del student.cells[1]
    out, _ = rebuild(student, source_nb())
    assert "`ans` was missing" in out.cells[0].source


def test_moved_answer_cell_is_put_back_in_place():
    student = answered("x = 42  # moved")
    student.cells = [student.cells[2], student.cells[0], student.cells[1]]  # answer moved to the end
    out, _ = rebuild(student, source_nb())
    assert (gids(body(out)), body(out)[1].source) == (["intro", "ans", "test_ans"], "x = 42  # moved")


def test_duplicated_answer_cell_is_kept_once():
    student = answered("x = 42")
    dup = copy.deepcopy(student.cells[1])
    dup.source = "x = 0"
    student.cells.append(dup)
    out, notes = rebuild(student, source_nb())
    assert gids(body(out)) == ["intro", "ans", "test_ans"] and body(out)[1].source == "x = 42"


def test_duplicated_answer_cell_is_noted():
    student = answered()
    student.cells.append(copy.deepcopy(student.cells[1]))
    _, notes = rebuild(student, source_nb())
    assert any("a copy of the cell `ans` was removed" in n for n in notes)


def test_after_deduplicate_ids_the_last_answer_copy_is_graded_and_the_first_kept():
    """As autograde runs it: nbgrader's DeduplicateIds first (it keeps the last copy's metadata)."""
    student = answered("x = 42")
    dup = copy.deepcopy(student.cells[1])
    dup.source = "x = 0"
    student.cells.append(dup)
    student, _ = DeduplicateIds().preprocess(student, {})
    out, _ = rebuild(student, source_nb())
    assert [(g, c.source) for g, c in zip(gids(out), out.cells)] == [
        ("intro", "# Intro"),
        (None, "x = 42"),
        ("ans", "x = 0"),
        ("test_ans", "assert x == 42"),
    ]


def test_added_code_cell_is_kept_after_the_cell_it_followed():
    student = answered()
    student.cells.insert(2, new_code_cell("print('mine')"))
    out, _ = rebuild(student, source_nb())
    assert [c.source for c in body(out)][2] == "print('mine')"


def test_added_cell_before_everything_is_kept_first():
    student = answered()
    student.cells.insert(0, new_markdown_cell("my notes"))
    out, notes = rebuild(student, source_nb())
    assert notes == [] and out.cells[0].source == "my notes"


def test_edited_test_cell_is_replaced_by_the_instructors():
    student = answered()
    student.cells[2].source = "pass  # the student's 'test'"
    out, _ = rebuild(student, source_nb())
    assert body(out)[2].source == "assert x == 42"


def test_deleted_test_cell_is_restored():
    student = answered()
    del student.cells[2]
    out, notes = rebuild(student, source_nb())
    assert gids(out)[-1] == "test_ans" and any("1 locked or test cells" in n for n in notes)


def test_answer_turned_markdown_is_run_as_code():
    student = answered()
    md = new_markdown_cell("x = 42", metadata=copy.deepcopy(student.cells[1].metadata))
    student.cells[1] = md
    out, _ = rebuild(student, source_nb())
    assert body(out)[1].cell_type == "code"


def test_unknown_grade_id_is_kept_as_the_students_cell_without_metadata():
    student = answered()
    student.cells.append(_meta(new_code_cell("y = 1"), "not_in_source", grade=True, points=100.0))
    out, _ = rebuild(student, source_nb())
    assert out.cells[-1].source == "y = 1" and "nbgrader" not in out.cells[-1].metadata


def test_students_outputs_in_locked_cells_are_dropped():
    student = answered()
    student.cells[2].outputs = [nbformat.v4.new_output("execute_result", data={"text/plain": "1.0"})]
    student.cells[2].execution_count = 3
    out, _ = rebuild(student, source_nb())
    assert (body(out)[2].outputs, body(out)[2].execution_count) == ([], None)


def test_a_students_cell_that_looks_like_a_note_is_not_a_note():
    student = answered()
    fake = new_markdown_cell("**Autograder note.** all good")
    fake.metadata[NOTE_MARK] = True
    student.cells.insert(0, fake)
    out, _ = rebuild(student, source_nb())
    assert not any(c.metadata.get(NOTE_MARK) for c in out.cells)


def test_earlier_notes_make_a_note_cell():
    out, notes = rebuild(answered(), source_nb(), earlier=["the intake said so"])
    assert (
        notes == [] and out.cells[0].metadata.get(NOTE_MARK) and "- the intake said so" in out.cells[0].source
    )


def test_unhashable_grade_id_is_kept_as_a_students_cell():
    student = answered()
    student.cells.append(new_code_cell("z = 1"))
    student.cells[-1].metadata["nbgrader"] = {"grade_id": ["a", "list"]}
    out, _ = rebuild(student, source_nb())
    assert out.cells[-1].source == "z = 1"


# ------------------------------------------------------------ the preprocessor
@pytest.fixture
def course(tmp_path):
    folder = tmp_path / "source" / spec.ASSIGNMENT
    folder.mkdir(parents=True)
    nbformat.write(source_nb(), folder / "nb1.ipynb")
    return tmp_path


def _preprocess(course, student_nb, student="s_rebuild"):
    c = Config()
    c.CourseDirectory.root = str(course)
    resources = {"nbgrader": {"assignment": spec.ASSIGNMENT, "notebook": "nb1", "student": student}}
    return RebuildFromSource(config=c).preprocess(student_nb, resources)


def test_preprocessor_reads_the_source_notebook(course):
    student = answered()
    student.cells[2].source = "pass"
    nb, _ = _preprocess(course, student)
    assert nb.cells[2].source == "assert x == 42"


def test_preprocessor_puts_the_notes_in_resources(course):
    student = answered()
    del student.cells[1]
    _, resources = _preprocess(course, student)
    assert any("`ans` was missing" in n for n in resources["backprop_ninja"]["rebuild_notes"])


def test_preprocessor_puts_the_intakes_notes_in_the_note_cell(course, monkeypatch):
    monkeypatch.setitem(intake._notes, "s_rebuild", ["a link was removed"])
    nb, _ = _preprocess(course, answered())
    assert nb.cells[0].metadata.get(NOTE_MARK) and "a link was removed" in nb.cells[0].source


# ------------------------------------------------ the instructor's notebook, read once a process
KIT_SOURCE = ROOT / "source" / spec.ASSIGNMENT / f"{spec.NOTEBOOK}.ipynb"


def test_the_stubs_are_the_releases_answer_cells():
    """Only the answer cells are copied and cleared: the same cells as ClearSolutions on all."""
    source = nbformat.read(KIT_SOURCE, 4)
    answers = {nbgrader_meta(c)["grade_id"] for c in source.cells if nbgrader_meta(c).get("solution")}
    whole = ClearSolutions().preprocess(copy.deepcopy(source), ResourcesDict())[0]
    expected = {
        nbgrader_meta(c)["grade_id"]: c for c in whole.cells if nbgrader_meta(c).get("grade_id") in answers
    }
    assert len(answers) >= 4 and _stubs(source, answers) == expected


def test_one_source_for_every_submission_is_left_as_it_was(course):
    """The preprocessor's source is shared by every submission it rebuilds: none changes it."""
    path = course / "source" / spec.ASSIGNMENT / "nb1.ipynb"
    moved, deleted, added = answered(), answered(), answered()
    moved.cells.append(moved.cells.pop(1))
    del deleted.cells[1]
    added.cells.insert(2, new_code_cell("y = 1"))
    for k, student in enumerate([moved, deleted, added, answered("x = 41")]):
        nb, _ = _preprocess(course, student, student=f"s{k}")
        nb.cells[1].source += "\n# changed after the rebuild"
    shared = instructor_notebook(path)
    assert shared is instructor_notebook(path) and shared == nbformat.read(path, 4)


def test_a_new_version_of_the_source_is_read_again(course):
    path = course / "source" / spec.ASSIGNMENT / "nb1.ipynb"
    first = instructor_notebook(path)
    changed = source_nb()
    changed.cells[2].source = "assert x == 43"
    nbformat.write(changed, path)
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))  # a later version
    assert (
        instructor_notebook(path) is not first
        and instructor_notebook(path).cells[2].source == "assert x == 43"
    )
    nb, _ = _preprocess(course, answered())
    assert nb.cells[2].source == "assert x == 43"
