"""grader/incoming/preflight.py in-process: a submitted notebook is made readable or replaced by the
empty assignment, and the notes say why; nothing is written into the notebook as a note."""

from __future__ import annotations

import nbformat
import pytest

from grader.incoming import preflight

NB = "backprop_ninja.ipynb"


@pytest.fixture
def release(tmp_path):
    path = tmp_path / "release.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("empty assignment")]), path)
    return path


def _submit(tmp_path, data: bytes, name: str = NB):
    folder = tmp_path / "submitted" / "s1" / "backprop_ninja"
    folder.mkdir(parents=True)
    (folder / name).write_bytes(data)
    return folder


def test_a_good_notebook_is_left_as_it_is(tmp_path, release):
    text = nbformat.writes(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")]))
    folder = _submit(tmp_path, text.encode())
    assert preflight.check_submission(folder, "backprop_ninja", release).notes == []
    assert (folder / NB).read_text() == text


def test_not_json_is_graded_as_the_empty_assignment(tmp_path, release):
    folder = _submit(tmp_path, b"not a notebook")
    result = preflight.check_submission(folder, "backprop_ninja", release)
    assert result.unreadable and "not JSON" in result.notes[0]
    assert (folder / (NB + ".unreadable")).read_bytes() == b"not a notebook"
    assert "empty assignment" in (folder / NB).read_text()


def test_an_oversized_file_is_not_read(tmp_path, release, monkeypatch):
    monkeypatch.setattr(preflight, "NOTEBOOK_BYTES", 1000)
    folder = _submit(tmp_path, b"{" + b" " * 2000 + b"}")
    result = preflight.check_submission(folder, "backprop_ninja", release)
    assert result.unreadable and "over the 0 MB" in result.notes[0]


def test_a_misnamed_notebook_is_graded_and_no_note_cell_is_added(tmp_path, release):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")])
    folder = _submit(tmp_path, nbformat.writes(nb).encode(), name="backprop_ninja (1).ipynb")
    result = preflight.check_submission(folder, "backprop_ninja", release)
    assert "graded as backprop_ninja.ipynb" in result.notes[0] and "&#40;1&#41;" in result.notes[0]
    graded = nbformat.read(folder / NB, as_version=4)
    assert [c.source for c in graded.cells] == ["x = 1"]
