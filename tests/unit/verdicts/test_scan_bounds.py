"""The static scan is bounded (issue 17, point 5): a cell over its size, work or time, or past its
submission's, is not scanned and is one "too_large" finding, serious wherever it is; nothing the
student writes makes it raise (a deep expression was a RecursionError) or run for minutes (a
1 MiB cell took ~6 s, 10 MiB a minute). What was found before the budget ran out stays."""

from __future__ import annotations

import ast
import time

import pytest

from grader import settings
from grader.exercise import spec
from grader.verdicts import scan_rules
from grader.verdicts.budget import for_submission
from grader.verdicts.scan import scan_source
from grader.verdicts.scan_rules import bound_names

CEILING = 5.0  # seconds: each case below takes under 0.3 s here (2 shared cores, busy)


def dead_blocks(chars: int, lines: int = 400) -> str:
    block = "if 0:\n" + "".join(f"    x = x + {i}\n" for i in range(lines))
    return block * max(1, chars // len(block))


def _kinds(found) -> list[tuple[str, str]]:
    return [(f.kind, f.what) for f in found]


@pytest.mark.parametrize("mib", [1, 10])
def test_a_cell_over_the_size_limit_is_not_parsed(mib):
    submission = for_submission()
    start = time.monotonic()
    found = scan_source("ex1_solution", "dW1 = W1.grad\n" + dead_blocks(mib * 2**20), budget=submission)
    assert time.monotonic() - start < CEILING
    assert _kinds(found) == [("too_large", "not scanned, too large")] and found[0].serious
    assert f"over the {settings.ANALYSIS_CELL_CHARS:,} a cell may have" in found[0].text()
    assert submission.spent == 0  # not a node of it was visited
    # the submission's other cells are scanned as before
    assert _kinds(scan_source("ex2_solution", "dlogits = logits.grad", budget=submission)) == [
        ("autograd", "reads .grad")
    ]


def test_a_cell_over_its_work_keeps_what_was_found(monkeypatch):
    source = "dW1 = W1.grad\n" + dead_blocks(4000, lines=40)
    nodes = sum(1 for _ in ast.walk(ast.parse(source)))  # parsing counts each, then the visit does
    monkeypatch.setattr(settings, "ANALYSIS_CELL_WORK", nodes * 3 // 2)
    found = scan_source("ex1_solution", source)
    assert _kinds(found) == [("too_large", "not scanned, too large"), ("autograd", "reads .grad")]
    assert f"over the {nodes * 3 // 2:,} units of work a cell may take" in found[0].text()


def test_a_quadratic_expression_is_stopped_by_the_work_count():
    """A bare tuple of .grad: each one looked at walks the whole statement (n^2 without a bound)."""
    source = "(" + ", ".join(["W1.grad"] * 3000) + ")"
    assert len(source) < settings.ANALYSIS_CELL_CHARS
    start = time.monotonic()
    found = scan_source("cell 3 (added)", source)
    assert time.monotonic() - start < CEILING
    assert ("too_large", "not scanned, too large") in _kinds(found)


@pytest.mark.parametrize("source", ["y = " + "+".join(["a"] * 5000), "y = " + "+".join(["a.grad"] * 600)])
def test_an_expression_too_deep_is_a_sign_not_an_error(source):
    found = scan_source("ex1_solution", source)
    assert ("too_large", "not scanned, too large") in _kinds(found)


def test_past_the_submissions_budget_its_cells_are_not_scanned(monkeypatch):
    monkeypatch.setattr(settings, "ANALYSIS_SUBMISSION_CHARS", 100)
    submission = for_submission()
    first = scan_source("ex1_solution", "dW1 = W1.grad  # " + "x" * 40, budget=submission)
    second = scan_source("ex2_solution", "dlogits = logits.grad  # " + "x" * 40, budget=submission)
    assert _kinds(first) == [("autograd", "reads .grad")]
    assert _kinds(second) == [("too_large", "not scanned, too large")]
    assert "a submission may have" in second[0].text()


def test_an_honest_cell_is_far_below_every_limit():
    honest = "\n".join(f"d{n} = (1.0 - h**2) * dh{n} + W{n}.T @ dlogits" for n in range(40))
    submission = for_submission()
    assert scan_source("ex1_solution", honest, budget=submission) == []
    assert submission.spent < settings.ANALYSIS_CELL_WORK / 10


def test_the_names_a_submission_binds_skip_what_is_too_large():
    start = time.monotonic()
    names = bound_names([dead_blocks(10 * 2**20), "dlogits_backward = 1", "y = " + "+".join(["a"] * 5000)])
    assert time.monotonic() - start < CEILING
    assert "dlogits_backward" in names and "x" not in names


def test_a_cell_seen_before_costs_its_submission_the_same_work_and_binds_the_same_names(monkeypatch):
    monkeypatch.setattr(scan_rules, "_seen", type(scan_rules._seen)())
    locked = "def f(a):\n    b = a + 1\n    return b\nseen = f(2)\n"
    spent = []
    for _ in range(2):
        submission = for_submission()
        monkeypatch.setattr(scan_rules, "for_submission", lambda s=submission: s)
        assert bound_names([locked]) == {"f", "a", "b", "seen", spec.EX4_FUNCTION}
        spent.append(submission.spent)
    assert spent[0] == spent[1] == sum(1 for _ in ast.walk(ast.parse(locked)))
    assert list(scan_rules._seen) == [locked]  # parsed once


def test_a_cell_over_its_budget_is_over_it_every_time_and_the_texts_kept_are_bounded(monkeypatch):
    monkeypatch.setattr(scan_rules, "_seen", type(scan_rules._seen)())
    deep = "y = " + "+".join(["a"] * 5000)
    for _ in range(2):
        assert bound_names([deep, "z = 1"]) == {"z", spec.EX4_FUNCTION}
    assert deep not in scan_rules._seen
    bound_names([f"v{i} = {i}" for i in range(3 * scan_rules.SEEN_CELLS)])
    assert len(scan_rules._seen) == scan_rules.SEEN_CELLS
    assert f"v{3 * scan_rules.SEEN_CELLS - 1} = {3 * scan_rules.SEEN_CELLS - 1}" in scan_rules._seen
