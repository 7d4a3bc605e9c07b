"""grader/verdicts/budget.py: the budget every analysis of a student's text spends from. What is
over a budget's own limit is refused at its level without costing the wider one; a wider budget
exhausted is the one raised, so its caller skips all it covers; the deadline is looked at each
time work is counted, so nothing runs past it and nothing is interrupted from outside."""

from __future__ import annotations

import ast

import pytest

from grader.verdicts.budget import Budget, OverBudget, for_cell, for_submission, parse, walk


def _level(call) -> str:
    with pytest.raises(OverBudget) as e:
        call()
    return e.value.level


def test_a_cell_over_its_own_limit_costs_its_submission_nothing():
    submission = Budget("submission", chars=100, work=100)
    cell = Budget("cell", chars=50, work=50, within=submission)
    assert _level(lambda: cell.take(60)) == "cell" and submission.taken == 0
    assert _level(lambda: cell.spend(60)) == "cell" and submission.spent == 0
    cell.take(40)
    cell.spend(40)
    assert (submission.taken, submission.spent) == (40, 40)


def test_the_widest_budget_exhausted_is_the_one_raised():
    submission = Budget("submission", chars=100, work=100)
    Budget("cell", chars=80, work=80, within=submission).spend(80)
    second = Budget("cell", chars=80, work=80, within=submission)
    assert _level(lambda: second.spend(30)) == "submission"
    assert _level(lambda: Budget("cell", within=Budget("class", seconds=0.0)).spend()) == "class"


def test_past_the_deadline_the_next_count_raises():
    budget = Budget("cell", seconds=0.0)
    with pytest.raises(OverBudget, match="over the 0 s a cell may take"):
        budget.spend()
    Budget("cell", seconds=60.0).spend(10**6)  # no work limit: only the clock


def test_walk_and_parse_count_every_node():
    tree = ast.parse("x = a + b")
    budget = Budget("cell")
    assert len(list(walk(tree, budget))) == budget.spent > 5
    assert _level(lambda: parse("y = " + "+".join(["a"] * 100), Budget("cell", work=50))) == "cell"
    assert _level(lambda: parse("y = " + "+".join(["a"] * 50_000), Budget("cell"))) == "cell"  # too deep


def test_the_kits_budgets_nest():
    cell = for_cell(for_submission())
    assert (cell.level, cell.within.level) == ("cell", "submission")
    assert cell.chars < cell.within.chars and cell.work < cell.within.work
