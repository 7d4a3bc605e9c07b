"""grader/exercise/verdict.py: a graded cell's verdict from the student's value and the
reference, the one wording the kernel's checks and the judge share."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from grader.exercise import spec
from grader.exercise.compare import MISSING
from grader.exercise.definitions.backprop_ninja import network
from grader.exercise.verdict import Verdict, compare_gradient, from_comparison, gradient_verdict
from grader.reference.backprop_ninja import rules

BY_NAME = {g.grade_id: g for g in spec.GRADIENTS}


@pytest.fixture(scope="module")
def ex1():
    """Values and autograd's gradients of exercise 1's chunked forward pass."""
    params, g = network.init_params()
    Xb = torch.randint(0, 27, (32, 3), generator=g)
    Yb = torch.randint(0, 27, (32,), generator=g)
    return rules.autograd_grads(params, Xb, Yb)


# ---------------------------------------------------------------- gradient_verdict
@pytest.mark.parametrize("gradient", [g for g in spec.GRADIENTS if g.exercise == 1], ids=lambda g: g.grade_id)
def test_correct_exercise_1_gradient_gets_full_points(ex1, gradient):
    values, auto = ex1
    manual, _ = rules.manual_grads(values)
    v = gradient_verdict(gradient, manual[gradient.target], auto[gradient.target])
    assert v.score == v.max_score == gradient.points == 1.0
    assert v.grade_id == gradient.grade_id
    assert v.text().startswith(f"PASS {gradient.grade_id}: 1/1 points")


def test_wrong_gradient_gets_zero(ex1):
    _, auto = ex1
    gradient = BY_NAME["ex1_dbndiff2"]
    v = gradient_verdict(gradient, auto["bndiff2"] * 31 / 32, auto["bndiff2"])  # Bessel
    assert v.score == 0.0 and v.max_score == 1.0
    text = v.text()
    assert text.startswith("FAIL ex1_dbndiff2: 0/1 points")
    assert "dbndiff2" in text and "approximate: False" in text


def test_exercise_2_one_formula_gets_two_points(ex1):
    values, auto = ex1
    logits, Yb, n = values["logits"], values["Yb"], values["n"]
    dlogits = F.softmax(logits, 1)
    dlogits[range(n), Yb] -= 1
    dlogits /= n
    v = gradient_verdict(BY_NAME["ex2_dlogits"], dlogits, auto["logits"])
    assert (v.score, v.max_score) == (2.0, 2.0)
    assert v.text().startswith("PASS ex2_dlogits: 2/2 points")


@pytest.mark.parametrize("bessel, points", [(True, 2.0), (False, 0.0)])
def test_exercise_3_one_formula(ex1, bessel, points):
    values, auto = ex1
    n, bnraw, dhpreact = values["n"], values["bnraw"], auto["hpreact"]
    factor = n / (n - 1) if bessel else 1.0
    dhprebn = (
        values["bngain"]
        * values["bnvar_inv"]
        / n
        * (n * dhpreact - dhpreact.sum(0) - factor * bnraw * (dhpreact * bnraw).sum(0))
    )
    v = gradient_verdict(BY_NAME["ex3_dhprebn"], dhprebn, auto["hprebn"])
    assert v.score == points and v.max_score == 2.0
    assert v.text().split()[0] == ("PASS" if bessel else "FAIL")
    assert "0/2 points" in v.text() or bessel


def test_zero_gradients_accept_zeros(ex1):
    _, auto = ex1
    for name in spec.ZERO_GRADIENTS:
        gradient = BY_NAME[f"ex1_{name}"]
        v = gradient_verdict(gradient, torch.zeros_like(auto[gradient.target]), auto[gradient.target])
        assert v.score == 1.0, name
        assert spec.ZERO_GRADIENTS[name] in v.text()


@pytest.mark.parametrize(
    "value, words",
    [
        (MISSING, ["not defined"]),
        (None, ["None", "(32, 27)"]),
        ([0.0] * 27, ["not a torch tensor"]),
        (torch.zeros(27, 32), ["wrong shape (27, 32)", "(32, 27)"]),
        (torch.full((32, 27), float("nan")), ["NaN or inf"]),
    ],
)
def test_problem_verdicts_score_zero_with_a_message(ex1, value, words):
    _, auto = ex1
    v = gradient_verdict(BY_NAME["ex1_dlogprobs"], value, auto["logprobs"])
    assert v.score == 0.0
    text = v.text()
    assert text.startswith("FAIL ex1_dlogprobs: 0/1 points")
    for word in words:
        assert word in text


def test_verdict_text_shows_fractional_points():
    v = Verdict("ex9_x", 0.5, 2.0, ["a line"])
    assert v.text() == "FAIL ex9_x: 0.5/2 points\n  a line"


def test_gradient_verdict_is_compare_gradient_then_from_comparison(ex1):
    _, auto = ex1
    g = BY_NAME["ex1_dh"]
    for value in (auto["h"].clone(), auto["h"] * 2, MISSING):
        cmp = compare_gradient(g, value, auto["h"])
        assert gradient_verdict(g, value, auto["h"]) == from_comparison(g, cmp)
    assert compare_gradient(
        BY_NAME["ex1_db1"], torch.zeros_like(auto["b1"]), auto["b1"]
    ).ok  # a zero gradient


def test_a_long_line_wraps_under_itself_and_reads_back_whole():
    """The formgrader and the feedback show output as it is: no line past TEXT_WIDTH columns;
    the feedback's table, reading the cell when the record is missing, joins it back."""
    from grader.exercise.cells import TEXT_WIDTH
    from grader.reports.verdict_rows import row

    hint = "hint: dW1 is not defined: ex1_solution raised AutogradUnavailable: " + "torch.autograd.grad " * 12
    v = Verdict("ex1_dW1", 0.0, 1.0, ["dW1 | exact: False", hint.strip()])
    lines = v.text().splitlines()
    assert len(lines) > 3 and all(len(l) <= TEXT_WIDTH for l in lines)
    assert lines[1] == "  dW1 | exact: False" and lines[2].startswith("  hint: dW1 is not defined")
    assert " ".join(l.strip() for l in lines[2:]) == hint.strip()
    cell = {"outputs": [{"output_type": "stream", "text": v.text() + "\n"}]}
    assert row(BY_NAME["ex1_dW1"], cell, None).verdict == hint.strip()[len("hint: ") :]
