"""The release, with real nbgrader: generated from source/, in sync with what is committed,
leaks nothing, and nbgrader's own validator agrees that the source passes and the release
fails. (What the committed notebooks hold is checked in tests/unit/exercise/test_notebooks.py.)"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import nbformat

from grader.exercise import spec

from conftest import ROOT, nbgrader

NB = f"{spec.ASSIGNMENT}/{spec.NOTEBOOK}.ipynb"


def _cells(path: Path):
    return nbformat.read(path, 4).cells


def _secret_lines(source_nb: Path) -> set[str]:
    """Every line of a solution region and of a hidden-test region in the instructor notebook."""
    secrets, inside = set(), None
    for cell in _cells(source_nb):
        for line in cell.source.split("\n"):
            s = line.strip()
            if s in ("### BEGIN SOLUTION", "### BEGIN HIDDEN TESTS"):
                inside = s
            elif s in ("### END SOLUTION", "### END HIDDEN TESTS"):
                inside = None
            elif inside and s:
                secrets.add(s)
    return secrets


def _all_release_text(release_dir: Path) -> str:
    texts = []
    for path in release_dir.rglob("*"):
        if path.suffix == ".ipynb":
            nb = nbformat.read(path, 4)
            for cell in nb.cells:
                texts.append(cell.source)
                for out in cell.get("outputs", []):
                    texts.append(json.dumps(out))
        elif path.is_file() and path.name != "names.txt":
            texts.append(path.read_text(errors="replace"))
    return "\n".join(texts)


def test_committed_release_equals_fresh_generation(released_course):
    fresh = json.loads((released_course / "release" / NB).read_text())
    committed = json.loads((ROOT / "release" / NB).read_text())
    assert committed == fresh, "release/ is stale: run `make release` and commit it"
    assert (released_course / "release" / spec.ASSIGNMENT / "names.txt").is_file()
    assert _release_files(ROOT / "release") == [NB]


def _release_files(release: Path) -> list[str]:
    """What a release hands out: not the data (downloaded separately) and not what previewing
    the notebook in Jupyter leaves behind (.ipynb_checkpoints/, which nbgrader's
    release_assignment and `make release` leave out too)."""
    return sorted(
        p.relative_to(release).as_posix()
        for p in release.rglob("*")
        if p.is_file() and p.name != "names.txt" and ".ipynb_checkpoints" not in p.parts
    )


def test_previewing_the_release_is_harmless(released_course, tmp_path):
    """Jupyter writes a checkpoint beside a notebook it opens: the release stays the release."""
    preview = released_course / "release" / spec.ASSIGNMENT / ".ipynb_checkpoints"
    preview.mkdir(exist_ok=True)
    (preview / f"{spec.NOTEBOOK}-checkpoint.ipynb").write_text("{}")
    try:
        assert _release_files(released_course / "release") == [NB]
        exchange = tmp_path / "exchange"
        exchange.mkdir(mode=0o777)
        nbgrader(
            released_course, "release_assignment", spec.ASSIGNMENT, "--force", f"--Exchange.root={exchange}"
        )
        handed = sorted(p.name for p in exchange.rglob("*") if p.is_file())
        assert f"{spec.NOTEBOOK}.ipynb" in handed
        assert not any("checkpoint" in name for name in handed), handed
    finally:
        shutil.rmtree(preview)


def test_no_solution_or_hidden_test_leaks_into_release(released_course):
    secrets = _secret_lines(ROOT / "source" / NB)
    assert len(secrets) > 60  # the reference answers of four exercises and 36 hidden tests
    for release_dir in (ROOT / "release", released_course / "release"):
        text = _all_release_text(release_dir)
        leaked = sorted(s for s in secrets if s in text)
        assert not leaked, f"{release_dir}: {leaked[:5]}"
        assert "BEGIN SOLUTION" not in text and "HIDDEN TESTS" not in text


def test_validate_source_passes_every_test(released_course):
    out = nbgrader(released_course, "validate", f"source/{NB}").stdout
    assert "Success! Your notebook passes all the tests." in out, out


def test_validate_invert_release_fails_every_test(released_course):
    out = nbgrader(released_course, "validate", "--invert", f"release/{NB}").stdout
    assert "Success! The notebook does not pass any tests." in out, out
