"""grader/incoming/preflight.py in-process: check_submission makes a submitted notebook
readable, or replaces it by the release notebook, and says why in its notes."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from grader.incoming import preflight

ROOT = Path(__file__).resolve().parents[3]
RELEASE_NB = ROOT / "release" / "backprop_ninja" / "backprop_ninja.ipynb"
NAME = "backprop_ninja"
FILE = f"{NAME}.ipynb"


@pytest.fixture(scope="module")
def release_sources():
    if not RELEASE_NB.is_file():
        pytest.skip(f"{RELEASE_NB} not generated")
    return [c.source for c in nbformat.read(RELEASE_NB, as_version=4).cells]


def _folder(tmp_path) -> Path:
    folder = tmp_path / "submitted" / "u1" / NAME
    folder.mkdir(parents=True)
    return folder


def _submit(tmp_path, data: bytes, name: str = FILE) -> Path:
    folder = _folder(tmp_path)
    (folder / name).write_bytes(data)
    return folder


def _nb(*sources: str) -> str:
    return nbformat.writes(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources]))


def _graded_sources(folder: Path) -> list[str]:
    return [c.source for c in nbformat.read(folder / FILE, as_version=4).cells]


def test_a_good_notebook_has_no_notes(tmp_path):
    folder = _submit(tmp_path, _nb("x = 1").encode())
    assert preflight.check_submission(folder, NAME, RELEASE_NB).notes == []


def test_the_student_is_the_submission_folders_parent(tmp_path):
    folder = _submit(tmp_path, _nb("x = 1").encode())
    assert preflight.check_submission(folder, NAME, RELEASE_NB).student == "u1"


def test_notebook_under_another_name_is_graded_under_the_expected_name(tmp_path):
    folder = _submit(tmp_path, _nb("x = 'mine'").encode(), name="Copy of backprop_ninja.ipynb")
    preflight.check_submission(folder, NAME, RELEASE_NB)
    assert _graded_sources(folder) == ["x = 'mine'"]


def test_notebook_under_another_name_is_noted(tmp_path):
    folder = _submit(tmp_path, _nb("x = 1").encode(), name="mine.ipynb")
    result = preflight.check_submission(folder, NAME, RELEASE_NB)
    assert result.notes == ["your notebook mine&#46;ipynb was graded as backprop_ninja.ipynb"]


def test_of_several_other_notebooks_the_largest_is_graded(tmp_path):
    folder = _submit(tmp_path, _nb("small = 1").encode(), name="a.ipynb")
    (folder / "b.ipynb").write_text(_nb("large = 1" + " " * 500))
    result = preflight.check_submission(folder, NAME, RELEASE_NB)
    assert (
        _graded_sources(folder) == ["large = 1" + " " * 500]
        and "1 other notebooks ignored" in result.notes[0]
    )


def test_no_notebook_at_all_is_noted(tmp_path):
    folder = _folder(tmp_path)
    result = preflight.check_submission(folder, NAME, RELEASE_NB)
    assert result.notes == [f"no notebook was submitted (expected {FILE})"]


def test_invalid_utf8_is_replaced_and_noted(tmp_path):
    raw = _nb("s = 'XX'").encode().replace(b"XX", b"\xff\xfe")
    folder = _submit(tmp_path, raw)
    result = preflight.check_submission(folder, NAME, RELEASE_NB)
    assert result.notes == ["the file was not valid UTF-8: unreadable characters were replaced"]


def test_invalid_utf8_notebook_is_rewritten_as_valid_utf8(tmp_path):
    folder = _submit(tmp_path, _nb("s = 'XX'").encode().replace(b"XX", b"\xff"))
    preflight.check_submission(folder, NAME, RELEASE_NB)
    assert _graded_sources(folder) == ["s = '\ufffd'"]


def test_a_repaired_notebook_keeps_the_original_beside(tmp_path):
    raw = _nb("s = 'XX'").encode().replace(b"XX", b"\xff")
    folder = _submit(tmp_path, raw)
    preflight.check_submission(folder, NAME, RELEASE_NB)
    assert (folder / (FILE + ".original")).read_bytes() == raw


def test_non_json_is_replaced_by_the_release_notebook(tmp_path, release_sources):
    folder = _submit(tmp_path, b"this is not json {")
    preflight.check_submission(folder, NAME, RELEASE_NB)
    assert _graded_sources(folder) == release_sources


def test_non_json_is_noted_and_kept_as_unreadable(tmp_path):
    folder = _submit(tmp_path, b"this is not json {")
    result = preflight.check_submission(folder, NAME, RELEASE_NB)
    assert (
        result.unreadable,
        "not JSON" in result.notes[0],
        (folder / (FILE + ".unreadable")).read_bytes(),
    ) == (True, True, b"this is not json {")


def test_json_that_is_not_a_notebook_is_replaced(tmp_path):
    folder = _submit(tmp_path, json.dumps({"hello": "world"}).encode())
    result = preflight.check_submission(folder, NAME, RELEASE_NB)
    assert result.unreadable and "JSON but not a notebook" in result.notes[0]


def test_an_empty_file_is_replaced(tmp_path):
    folder = _submit(tmp_path, b"  \n")
    result = preflight.check_submission(folder, NAME, RELEASE_NB)
    assert result.unreadable and "the file is empty" in result.notes[0]


def test_a_file_over_notebook_bytes_is_refused(tmp_path, monkeypatch, release_sources):
    monkeypatch.setattr(preflight, "NOTEBOOK_BYTES", 100)
    folder = _submit(tmp_path, _nb("x = 1" + " " * 200).encode())
    result = preflight.check_submission(folder, NAME, RELEASE_NB)
    assert result.unreadable and "over the" in result.notes[0] and _graded_sources(folder) == release_sources


def test_a_file_under_notebook_bytes_is_read(tmp_path, monkeypatch):
    data = _nb("x = 1").encode()
    monkeypatch.setattr(preflight, "NOTEBOOK_BYTES", len(data))
    folder = _submit(tmp_path, data)
    assert preflight.check_submission(folder, NAME, RELEASE_NB).unreadable is False


def test_a_huge_notebooks_outputs_are_dropped(tmp_path, monkeypatch):
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(
                "print('x')", outputs=[nbformat.v4.new_output("stream", name="stdout", text="x" * 5000)]
            )
        ]
    )
    monkeypatch.setattr(preflight, "HUGE_BYTES", 1000)
    folder = _submit(tmp_path, nbformat.writes(nb).encode())
    result = preflight.check_submission(folder, NAME, RELEASE_NB)
    outputs = nbformat.read(folder / FILE, as_version=4).cells[0].outputs
    assert outputs == [] and "outputs were dropped" in result.notes[0]


def _v3_notebook(source: str) -> str:
    v3 = nbformat.v3
    nb = v3.new_notebook(worksheets=[v3.new_worksheet(cells=[v3.new_code_cell(input=source)])])
    return nbformat.writes(nb, version=3)


def test_nbformat3_is_converted_to_4(tmp_path):
    folder = _submit(tmp_path, _v3_notebook("y = 3").encode())
    preflight.check_submission(folder, NAME, RELEASE_NB)
    graded = json.loads((folder / FILE).read_text())
    assert (graded["nbformat"], ["".join(c["source"]) for c in graded["cells"]]) == (4, ["y = 3"])


def test_nbformat3_conversion_is_noted(tmp_path):
    folder = _submit(tmp_path, _v3_notebook("y = 3").encode())
    result = preflight.check_submission(folder, NAME, RELEASE_NB)
    assert result.notes == ["the notebook was in format 3: it was converted to format 4"]
