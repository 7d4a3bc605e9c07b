"""Preflight is bounded (issue 17, point 5): a notebook file too large is not read, one of too
many cells is not validated (nbformat's validation costs each cell: 200,000 cells took 45 s),
both graded as the empty assignment with a note saying why; a cell whose source is too large is
emptied, its classmates' cells kept; past its time the notebook is graded as empty, never hung."""

from __future__ import annotations

import time
from pathlib import Path

import nbformat
import pytest

from grader import settings
from grader.incoming import preflight

ROOT = Path(__file__).resolve().parents[3]
RELEASE_NB = ROOT / "release" / "backprop_ninja" / "backprop_ninja.ipynb"
NAME = "backprop_ninja"
FILE = f"{NAME}.ipynb"
CEILING = 10.0  # seconds: the cases below take under 1 s here (2 shared cores, busy)


@pytest.fixture(scope="module")
def release_sources():
    if not RELEASE_NB.is_file():
        pytest.skip(f"{RELEASE_NB} not generated")
    return [c.source for c in nbformat.read(RELEASE_NB, as_version=4).cells]


def _submit(tmp_path, *sources: str) -> Path:
    folder = tmp_path / "submitted" / "u1" / NAME
    folder.mkdir(parents=True)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    nbformat.write(nb, folder / FILE)
    return folder


def _graded(folder: Path) -> list[str]:
    return [c.source for c in nbformat.read(folder / FILE, as_version=4).cells]


def test_a_notebook_over_its_size_is_refused_unread(tmp_path, release_sources):
    folder = tmp_path / "submitted" / "u1" / NAME
    folder.mkdir(parents=True)
    with open(folder / FILE, "wb") as f:  # sparse: as large as it says, nothing written
        f.truncate(2 * settings.NOTEBOOK_BYTES)
    start = time.monotonic()
    result = preflight.check_submission(folder, NAME, RELEASE_NB)
    assert time.monotonic() - start < CEILING
    mb = settings.NOTEBOOK_BYTES // 2**20
    assert result.unreadable and result.notes == [
        f"your notebook could not be read (the file is {2 * mb} MB, over the {mb} MB a notebook may have); "
        "it was graded as the empty assignment"
    ]
    assert _graded(folder) == release_sources


def test_a_notebook_of_too_many_cells_is_refused(tmp_path, release_sources):
    folder = _submit(tmp_path, *["x = 1"] * (settings.NOTEBOOK_CELLS + 1))
    result = preflight.check_submission(folder, NAME, RELEASE_NB)
    over = f"the notebook has {settings.NOTEBOOK_CELLS + 1:,} cells, over the {settings.NOTEBOOK_CELLS:,}"
    assert result.unreadable and over in result.notes[0]
    assert _graded(folder) == release_sources


def test_a_cell_over_its_size_is_emptied_and_the_others_kept(tmp_path):
    huge = "if 0:\n" + "    x = x + 1\n" * (settings.NOTEBOOK_CELL_CHARS // 14 + 1)  # 2 MiB of dead code
    folder = _submit(tmp_path, "x = 1", huge, "y = 2")
    start = time.monotonic()
    result = preflight.check_submission(folder, NAME, RELEASE_NB)
    assert time.monotonic() - start < CEILING
    assert not result.unreadable and _graded(folder) == ["x = 1", "", "y = 2"]
    over = f"cell 2 has {len(huge):,} characters, over the {settings.NOTEBOOK_CELL_CHARS:,}"
    assert over in result.notes[0]
    assert "it was emptied and not graded" in result.notes[0]
    assert (folder / (FILE + ".original")).stat().st_size > len(huge)  # the student's file, kept beside


def test_past_its_time_a_notebook_is_graded_as_empty(tmp_path, monkeypatch, release_sources):
    monkeypatch.setattr(preflight, "PREFLIGHT_SECONDS", 0.0)
    folder = _submit(tmp_path, "x = 1")
    result = preflight.check_submission(folder, NAME, RELEASE_NB)
    assert result.unreadable and "over the 0 s a notebook may take" in result.notes[0]
    assert _graded(folder) == release_sources


def test_an_honest_notebook_is_far_below_every_limit(tmp_path):
    folder = _submit(tmp_path, "x = 1")
    assert preflight.check_submission(folder, NAME, RELEASE_NB).notes == []
    size = RELEASE_NB.stat().st_size
    cells = len(nbformat.read(RELEASE_NB, as_version=4).cells)
    assert size * 100 < settings.NOTEBOOK_BYTES and cells * 10 < settings.NOTEBOOK_CELLS
