"""benchmarks/cpu_account.py's split of a batch's CPU into its start-up and each submission's once
warm: the arithmetic `make bench` prints the issue's target against."""

from __future__ import annotations

import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
from cpu_account import once_warm, print_warm  # noqa: E402


def test_the_larger_batchs_extra_cpu_is_its_extra_submissions():
    # start-up 10 s for the replay and 6 for nbgrader; 0.5 and 0.25 s a submission once warm
    at_40 = {"replay": 10 + 40 * 0.5, "nbgrader": 6 + 40 * 0.25}
    at_2 = {"replay": 10 + 2 * 0.5, "nbgrader": 6 + 2 * 0.25, "coordinator": 1.0}
    per, start = once_warm(at_40, at_2, 40, 2)
    assert per["replay"] == pytest.approx(0.5) and per["nbgrader"] == pytest.approx(0.25)
    assert start["replay"] == pytest.approx(10) and start["nbgrader"] == pytest.approx(6)
    # a kind seen in one batch only counts as nothing in the other
    assert per["coordinator"] == pytest.approx(-1 / 38) and start["coordinator"] == pytest.approx(1 + 2 / 38)


def test_two_batches_of_one_size_are_refused():
    with pytest.raises(ValueError, match="different sizes"):
        once_warm({"replay": 1.0}, {"replay": 1.0}, 2, 2)


def test_the_target_line_compares_cpu_with_stocks_seconds(capsys):
    print_warm({"replay": 10 + 40 * 0.5}, {"replay": 10 + 2 * 0.5}, (40, 2), 4.0, (1.0, 4.46))
    out = capsys.readouterr().out
    assert "0.50 s/submission" in out  # once warm
    assert "10.0 s" in out  # start-up
    # 30 CPU-s over 40 is 0.75 a submission: 0.19 of stock's 4 s; once warm 0.12; the target 0.22
    assert "stock's seconds a submission: 0.19, once warm 0.12 (target 0.22" in out
