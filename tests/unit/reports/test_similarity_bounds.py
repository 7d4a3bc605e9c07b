"""Similarity is bounded (issue 17, point 5): a cell of `if 0:` blocks (dead code the replay grades
in seconds) made the canonical order quadratic in the whole cell and held the class's check for
minutes. Now a cell or submission over its budget is not compared and is listed as "too_large",
the canonical form's work grows linearly with the blocks, past the class's deadline who was not
compared is listed, and every honest cell, the attacker's own included, is still compared."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import nbformat
import pytest
from test_similarity import COPIED_EX1, ORIGINAL_EX1

from grader import settings
from grader.exercise import spec
from grader.incoming.submissions import Sample, reference_answers, write_submissions
from grader.reports import canonical, similarity, suspicious
from grader.reports.similarity import similar_pairs
from grader.verdicts.budget import Budget, OverBudget, end_checks_seconds

ROOT = Path(__file__).resolve().parents[3]
NB = Path(spec.ASSIGNMENT) / f"{spec.NOTEBOOK}.ipynb"
# similar_pairs on the honest part of these classes takes ~0.3 s here (2 shared cores, busy);
# the attacker's cells must add nothing like the minutes they cost: a ceiling 10x that
CEILING = 10.0


def dead_blocks(chars: int, lines: int = 400) -> str:
    """`if 0:` blocks of `lines` dependent statements each, to `chars` characters: never run."""
    block = "if 0:\n" + "".join(f"    x = x + {i}\n" for i in range(lines))
    return block * max(1, chars // len(block))


@pytest.fixture
def course(tmp_path) -> Path:
    for stage in ("source", "release"):
        (tmp_path / stage / NB).parent.mkdir(parents=True)
        shutil.copy(ROOT / stage / NB, tmp_path / stage / NB)
    return tmp_path


def _lecture(course: Path, gid: str) -> str:
    return reference_answers(nbformat.read(course / "source" / NB, as_version=4))[gid]


def _class(course: Path, attacker: Sample) -> None:
    write_submissions(
        [
            Sample("orig", "own solution", replace={"ex1_solution": ORIGINAL_EX1}),
            Sample("copier", "copied it", replace={"ex1_solution": COPIED_EX1}),
            attacker,
        ],
        course=course,
    )


def _pairs(found) -> list[list[str]]:
    return sorted(sorted(f.students) for f in found)


@pytest.mark.parametrize("mib", [1, 10])
def test_the_quadratic_block_cell_is_too_large_and_the_rest_is_compared(course, mib):
    attack = _lecture(course, "ex1_solution") + "\n" + dead_blocks(mib * 2**20)
    # the attacker's own added cell copies orig's: it is compared although ex1's is not
    _class(
        course,
        Sample("zed", "dead code", replace={"ex1_solution": attack}, added=[("autograd", ORIGINAL_EX1)]),
    )
    notes = []
    start = time.monotonic()
    found = similar_pairs(course, notes=notes)
    assert time.monotonic() - start < CEILING
    assert _pairs(found) == [["copier", "orig"], ["copier", "zed"], ["orig", "zed"]]
    assert [(n.student, n.kind, n.grade_ids) for n in notes] == [("zed", "too_large", ["ex1_solution"])]
    # refused by its size, before it is parsed
    assert f"characters, over the {settings.ANALYSIS_CELL_CHARS:,} a cell may have" in notes[0].evidence
    entries = suspicious.collect_findings(course, records={})
    assert [(e.students, e.kind) for e in entries if e.kind != "similar"] == [(["zed"], "too_large")]


def test_a_cell_of_many_blocks_under_the_size_limit_is_over_its_work(course):
    attack = dead_blocks(settings.ANALYSIS_CELL_CHARS - 1000, lines=150)
    assert len(attack) < settings.ANALYSIS_CELL_CHARS
    _class(course, Sample("zed", "dead code", added=[("autograd", attack), ("autograd", ORIGINAL_EX1)]))
    notes = []
    found = similar_pairs(course, notes=notes)
    assert _pairs(found) == [["copier", "orig"], ["copier", "zed"], ["orig", "zed"]]
    assert [(n.student, n.kind) for n in notes] == [("zed", "too_large")]
    assert notes[0].evidence.startswith("cell ") and "(added): too large to compare" in notes[0].evidence
    assert f"over the {settings.ANALYSIS_CELL_WORK:,} units of work a cell may take" in notes[0].evidence


def test_the_canonical_form_is_refused_at_its_cells_budget():
    """Each block's order costs the square of its statements, counted before it is done: the
    cell's budget refuses the block that would take it past its work, however many follow."""
    for blocks in (5, 10):  # ~1,000 statements each
        cell = Budget("cell", work=settings.ANALYSIS_CELL_WORK)
        start = time.monotonic()
        with pytest.raises(OverBudget, match="units of work a cell may take"):
            canonical.tokens(dead_blocks(1, lines=150) * blocks, set(), cell)
        assert cell.spent <= settings.ANALYSIS_CELL_WORK and time.monotonic() - start < CEILING
    one = Budget("unbounded")
    canonical.tokens(dead_blocks(1, lines=150), set(), one)
    assert 150**2 / 2 < one.spent < 2 * 150**2  # one block: its pairs, then linear work
    # one block of honest code is always ordered
    assert settings.MAX_SORTED_STATEMENTS**2 / 2 < settings.ANALYSIS_CELL_WORK


def test_past_the_submissions_budget_its_later_cells_are_listed(course):
    big = ORIGINAL_EX1 * 5  # ~6,300 characters, ~26,000 units: each cell is within its own budget
    added = [("autograd", ORIGINAL_EX1)] + [("autograd", big)] * 10
    _class(course, Sample("zed", "many large cells", added=added))
    notes = []
    found = similar_pairs(course, notes=notes)
    assert ["orig", "zed"] in _pairs(found)  # its first cells are compared
    assert [(n.student, n.kind) for n in notes] == [("zed", "too_large")]
    assert "more: too large to compare (over the" in notes[0].evidence
    assert "a submission may take" in notes[0].evidence


def test_a_cell_nested_too_deeply_is_too_large(course):
    deep = "y = " + "+".join(["a"] * 5000)
    _class(course, Sample("zed", "deep", added=[("autograd", deep), ("autograd", ORIGINAL_EX1)]))
    notes = []
    found = similar_pairs(course, notes=notes)
    assert ["orig", "zed"] in _pairs(found)
    assert [(n.student, n.kind) for n in notes] == [("zed", "too_large")]


def test_past_the_class_deadline_who_was_not_compared_is_listed(course):
    _class(course, Sample("zed", "own", replace={"ex1_solution": ORIGINAL_EX1}))
    notes = []
    assert similar_pairs(course, notes=notes, seconds=0.0) == []
    assert sorted((n.student, n.kind) for n in notes) == [
        ("copier", "not_compared"),
        ("orig", "not_compared"),
        ("zed", "not_compared"),
    ]
    assert "the similarity check's 0 s were over" in notes[0].evidence
    notes = []
    assert len(similar_pairs(course, notes=notes, seconds=600.0)) == 3 and notes == []


def test_the_batchs_deadline_is_a_share_of_its_grading_time():
    assert end_checks_seconds(0) == settings.END_CHECKS_SECONDS
    assert end_checks_seconds(20_000) == pytest.approx(settings.END_CHECKS_SHARE * 20_000)


def test_a_deadline_while_counting_pairs_lists_everyone_as_not_fully_compared(course, monkeypatch):
    _class(course, Sample("zed", "own", replace={"ex1_solution": ORIGINAL_EX1}))
    fingerprints = similarity._fingerprints

    def then_late(course, fixed, base, notes, budget):
        out = fingerprints(course, fixed, base, notes, budget)
        budget.deadline = 0.0  # the deadline passes once every student's cells are read
        return out

    monkeypatch.setattr(similarity, "_fingerprints", then_late)
    notes = []
    similar_pairs(course, notes=notes, seconds=600.0)  # no exception; what was counted is kept
    assert [(n.student, n.kind) for n in notes] == [(s, "not_compared") for s in ("copier", "orig", "zed")]
    assert "not compared with every classmate" in notes[0].evidence


def test_a_notebook_file_over_preflights_limit_is_not_read(course):
    _class(course, Sample("zed", "own"))
    with open(course / "submitted" / "zed" / NB, "r+b") as f:  # sparse: as large as it says
        f.truncate(settings.NOTEBOOK_BYTES + 2**20)
    notes = []
    assert _pairs(similar_pairs(course, notes=notes)) == [["copier", "orig"]]
    assert [(n.student, n.kind) for n in notes] == [("zed", "too_large")]
    mb = settings.NOTEBOOK_BYTES >> 20
    assert f"the notebook is {mb + 1} MB, over {mb} MB" in notes[0].evidence
