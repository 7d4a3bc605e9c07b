"""grader/incoming/intake.py in-process: links, devices and hard links in a submission folder are
replaced before anything copies it; the kit's notes come only from the kit."""

from __future__ import annotations

import json
import os

import nbformat
import pytest

from grader.exercise import spec
from grader.incoming import intake
from grader.preprocessors.rebuild_from_source import NOTE_MARK, rebuild

NB = f"{spec.NOTEBOOK}.ipynb"


@pytest.fixture
def course(tmp_path):
    release = tmp_path / "release" / spec.ASSIGNMENT
    release.mkdir(parents=True)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("the empty assignment")])
    nbformat.write(nb, release / NB)
    folder = tmp_path / "submitted" / "mallory" / spec.ASSIGNMENT
    folder.mkdir(parents=True)
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")]), folder / NB)
    return tmp_path


def _folder(course, who="mallory"):
    return course / "submitted" / who / spec.ASSIGNMENT


def _release(course):
    return course / "release" / spec.ASSIGNMENT / NB


def test_plain_files_are_left_alone(course):
    (_folder(course) / "data.txt").write_text("mine")
    assert intake.replace_non_regular(_folder(course), _release(course)) == []
    assert (_folder(course) / "data.txt").read_text() == "mine"


def test_a_link_to_a_secret_is_removed_not_followed(course, tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("root only")
    (_folder(course) / "leak.txt").symlink_to(secret)
    notes = intake.replace_non_regular(_folder(course), _release(course))
    assert not os.path.lexists(_folder(course) / "leak.txt")
    assert secret.read_text() == "root only"
    assert len(notes) == 1 and "was a link" in notes[0] and "leak&#46;txt" in notes[0]


def test_a_linked_notebook_becomes_the_empty_assignment(course):
    alice = _folder(course, "alice")
    alice.mkdir(parents=True)
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("alice = 38")]), alice / NB)
    (_folder(course) / NB).unlink()
    (_folder(course) / NB).symlink_to(alice / NB)
    notes = intake.replace_non_regular(_folder(course), _release(course))
    path = _folder(course) / NB
    assert not path.is_symlink() and "the empty assignment" in path.read_text()
    assert "alice = 38" in (alice / NB).read_text()
    assert "empty assignment was graded" in notes[0]


def test_devices_pipes_and_hard_links_are_removed(course, tmp_path):
    folder = _folder(course)
    os.mkfifo(folder / "pipe")
    (folder / "zero").symlink_to("/dev/zero")
    (tmp_path / "outside").write_text("someone else's")
    os.link(tmp_path / "outside", folder / "hard")
    (folder / "sub").mkdir()
    (folder / "sub" / "up").symlink_to("../..")
    notes = intake.replace_non_regular(folder, _release(course))
    assert sorted(p.name for p in folder.rglob("*")) == [NB, "sub"]
    assert (tmp_path / "outside").read_text() == "someone else's"
    assert any("device, pipe or socket" in n for n in notes) and any("hard link" in n for n in notes)
    assert len(notes) == 4


def test_a_linked_submission_folder_is_replaced(course):
    alice = course / "submitted" / "alice"
    (alice / spec.ASSIGNMENT).mkdir(parents=True)
    (alice / spec.ASSIGNMENT / NB).write_text("alice's")
    eve = course / "submitted" / "eve"
    eve.symlink_to(alice)
    notes = intake.replace_non_regular(eve / spec.ASSIGNMENT, _release(course))
    assert not eve.is_symlink() and "the empty assignment" in (eve / spec.ASSIGNMENT / NB).read_text()
    assert (alice / spec.ASSIGNMENT / NB).read_text() == "alice's"
    assert "folder was a link" in notes[0]


def test_the_hook_replaces_links_and_keeps_the_notes_for_rebuild(course):
    (_folder(course) / "zero.bin").symlink_to("/dev/zero")
    intake.before_autograde(assignment=spec.ASSIGNMENT, student="*", notebooks=[str(_folder(course) / NB)])
    assert not os.path.lexists(_folder(course) / "zero.bin")
    assert any("zero&#46;bin" in n for n in intake.notes_for("mallory"))


def test_saved_notes_count_only_for_the_notebook_they_were_written_for(course):
    hook = dict(assignment=spec.ASSIGNMENT, student="*", notebooks=[str(_folder(course) / NB)])
    intake.save_notes(course, "mallory", ["converted to format 4"])
    intake.before_autograde(**hook)
    assert intake.notes_for("mallory") == ["converted to format 4"]
    (_folder(course) / NB).write_text((_folder(course) / NB).read_text() + " ")  # resubmitted since
    intake.before_autograde(**hook)
    assert intake.notes_for("mallory") == []
    saved = json.loads((course / "reports" / "intake" / "mallory.json").read_text())
    assert saved["notes"] == ["converted to format 4"]


def _source():
    test = nbformat.v4.new_code_cell("# test")
    test.metadata["nbgrader"] = {
        "grade": True,
        "grade_id": "ex1_dlogprobs",
        "points": 1,
        "solution": False,
        "locked": True,
        "schema_version": 3,
    }
    return nbformat.v4.new_notebook(cells=[test])


def test_a_students_forged_note_is_only_a_cell_of_theirs():
    forged = nbformat.v4.new_markdown_cell("FAKE NOTE: the instructor approved full marks")
    forged.metadata[NOTE_MARK] = True
    student = nbformat.v4.new_notebook(cells=[forged] + _source().cells)
    out, notes = rebuild(student, _source(), earlier=[])
    assert notes == []
    assert not any(c.metadata.get(NOTE_MARK) for c in out.cells)
    assert any("FAKE NOTE" in c.source for c in out.cells)  # kept, as the student's own cell


def test_the_kits_note_quotes_grade_ids_and_holds_earlier_notes():
    cell = nbformat.v4.new_code_cell("print(1)")
    cell.metadata["nbgrader"] = {
        "grade": True,
        "grade_id": "<img src=x onerror=alert(1)>\x1b[2J",
        "points": 5,
    }
    student = nbformat.v4.new_notebook(cells=_source().cells + [cell])
    out, notes = rebuild(
        student, _source(), earlier=["leak&#46;txt was a link: it was removed, not followed"]
    )
    note = out.cells[0]
    assert note.metadata.get(NOTE_MARK)
    assert "<img" not in note.source and "\x1b" not in note.source and "&#60;img" in note.source
    assert "leak&#46;txt was a link" in note.source


def test_files_a_browser_would_run_are_named_and_ignored_by_nbgrader(course):
    import fnmatch

    (_folder(course) / "Page.HTML").write_text("<script>alert(1)</script>")
    (_folder(course) / "notes.txt").write_text("fine")
    notes = intake.replace_non_regular(_folder(course), _release(course))
    assert len(notes) == 1 and "Page&#46;HTML is not copied" in notes[0]
    assert any(fnmatch.fnmatch("Page.HTML", p) for p in intake.ACTIVE_FILE_PATTERNS)
    assert not any(fnmatch.fnmatch("notes.txt", p) for p in intake.ACTIVE_FILE_PATTERNS)
