"""The release: generated from source/, in sync with what is committed, leaks nothing,
and nbgrader's own validator agrees that the source passes and the release fails."""
from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat

from conftest import ROOT, nbgrader
from grader import spec

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
    tracked = sorted(p.relative_to(ROOT / "release").as_posix()
                     for p in (ROOT / "release").rglob("*") if p.is_file() and p.name != "names.txt")
    assert tracked == [NB]


def test_no_solution_or_hidden_test_leaks_into_release(released_course):
    secrets = _secret_lines(ROOT / "source" / NB)
    assert len(secrets) > 60  # the reference answers of four exercises and 36 hidden tests
    for release_dir in (ROOT / "release", released_course / "release"):
        text = _all_release_text(release_dir)
        leaked = sorted(s for s in secrets if s in text)
        assert not leaked, f"{release_dir}: {leaked[:5]}"
        assert "BEGIN SOLUTION" not in text and "HIDDEN TESTS" not in text


def test_release_has_stubs_no_outputs_and_locked_cells():
    cells = _cells(ROOT / "release" / NB)
    answers = [c for c in cells if c.metadata.nbgrader.get("solution")]
    assert [c.metadata.nbgrader.grade_id for c in answers] == list(spec.ANSWER_CELLS.values())
    assert all("# YOUR CODE HERE" in c.source and "raise NotImplementedError()" in c.source for c in answers)
    assert all(not c.outputs and c.execution_count is None for c in cells if c.cell_type == "code")
    assert all(c.metadata.nbgrader.get("locked") for c in cells if not c.metadata.nbgrader.get("solution"))


def test_grade_cells_follow_the_spec():
    cells = _cells(ROOT / "source" / NB)
    graded = {c.metadata.nbgrader.grade_id: c.metadata.nbgrader.points
              for c in cells if c.metadata.nbgrader.get("grade")}
    assert graded == {g.grade_id: g.points for g in spec.GRADED}
    assert len([g for g in spec.GRADIENTS if g.exercise == 1]) == 26
    # each test cell grades exactly its own grade id
    for c in cells:
        if c.metadata.nbgrader.get("grade"):
            assert re.findall(r'grade\("([^"]+)"', c.source) == [c.metadata.nbgrader.grade_id]


def test_validate_source_passes_every_test(released_course):
    out = nbgrader(released_course, "validate", f"source/{NB}").stdout
    assert "Success! Your notebook passes all the tests." in out, out


def test_validate_invert_release_fails_every_test(released_course):
    out = nbgrader(released_course, "validate", "--invert", f"release/{NB}").stdout
    assert "Success! The notebook does not pass any tests." in out, out
