"""grader.grading: a verdict per graded cell, from the student's values and the reference."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from conftest import manual_backward
from grader import grading, lecture, spec
from grader.compare import MISSING

EX4 = [g for g in spec.GRADIENTS if g.exercise == 4]
BY_NAME = {g.grade_id: g for g in spec.GRADIENTS}



@pytest.fixture(scope="module")
def ex4_inputs():
    """What incell passes to run_ex4: exercise 4's parameters (200 hidden) and a batch."""
    params, g = lecture.init_params(n_hidden=lecture.N_HIDDEN_TRAIN)
    Xb = torch.randint(0, 27, (32, 3), generator=g)
    Yb = torch.randint(0, 27, (32,), generator=g)
    return params, Xb, Yb


@pytest.fixture(scope="module")
def ex1():
    """Values and autograd's gradients of exercise 1's chunked forward pass."""
    params, g = lecture.init_params()
    Xb = torch.randint(0, 27, (32, 3), generator=g)
    Yb = torch.randint(0, 27, (32,), generator=g)
    return lecture.autograd_grads(params, Xb, Yb)


# ---------------------------------------------------------------- gradient_verdict
@pytest.mark.parametrize("gradient", [g for g in spec.GRADIENTS if g.exercise == 1], ids=lambda g: g.grade_id)
def test_correct_exercise_1_gradient_gets_full_points(ex1, gradient):
    values, auto = ex1
    manual, _ = lecture.manual_grads(values)
    v = grading.gradient_verdict(gradient, manual[gradient.target], auto[gradient.target])
    assert v.score == v.max_score == gradient.points == 1.0
    assert v.grade_id == gradient.grade_id
    assert v.text().startswith(f"PASS {gradient.grade_id}: 1/1 points")


def test_wrong_gradient_gets_zero(ex1):
    _, auto = ex1
    gradient = BY_NAME["ex1_dbndiff2"]
    v = grading.gradient_verdict(gradient, auto["bndiff2"] * 31 / 32, auto["bndiff2"])  # Bessel
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
    v = grading.gradient_verdict(BY_NAME["ex2_dlogits"], dlogits, auto["logits"])
    assert (v.score, v.max_score) == (2.0, 2.0)
    assert v.text().startswith("PASS ex2_dlogits: 2/2 points")


@pytest.mark.parametrize("bessel, points", [(True, 2.0), (False, 0.0)])
def test_exercise_3_one_formula(ex1, bessel, points):
    values, auto = ex1
    n, bnraw, dhpreact = values["n"], values["bnraw"], auto["hpreact"]
    factor = n / (n - 1) if bessel else 1.0
    dhprebn = values["bngain"] * values["bnvar_inv"] / n * (
        n * dhpreact - dhpreact.sum(0) - factor * bnraw * (dhpreact * bnraw).sum(0))
    v = grading.gradient_verdict(BY_NAME["ex3_dhprebn"], dhprebn, auto["hprebn"])
    assert v.score == points and v.max_score == 2.0
    assert v.text().split()[0] == ("PASS" if bessel else "FAIL")
    assert "0/2 points" in v.text() or bessel


def test_zero_gradients_accept_zeros(ex1):
    _, auto = ex1
    for name in spec.ZERO_GRADIENTS:
        gradient = BY_NAME[f"ex1_{name}"]
        v = grading.gradient_verdict(gradient, torch.zeros_like(auto[gradient.target]), auto[gradient.target])
        assert v.score == 1.0, name
        assert spec.ZERO_GRADIENTS[name] in v.text()


@pytest.mark.parametrize("value, words", [
    (MISSING, ["not defined"]),
    (None, ["None", "(32, 27)"]),
    ([0.0] * 27, ["not a torch tensor"]),
    (torch.zeros(27, 32), ["wrong shape (27, 32)", "(32, 27)"]),
    (torch.full((32, 27), float("nan")), ["NaN or inf"]),
])
def test_problem_verdicts_score_zero_with_a_message(ex1, value, words):
    _, auto = ex1
    v = grading.gradient_verdict(BY_NAME["ex1_dlogprobs"], value, auto["logprobs"])
    assert v.score == 0.0
    text = v.text()
    assert text.startswith("FAIL ex1_dlogprobs: 0/1 points")
    for word in words:
        assert word in text


def test_verdict_text_shows_fractional_points():
    v = grading.Verdict("ex9_x", 0.5, 2.0, ["a line"])
    assert v.text() == "FAIL ex9_x: 0.5/2 points\n  a line"


# ---------------------------------------------------------------- run_ex4
def test_run_ex4_with_a_correct_backward(ex4_inputs):
    run = grading.run_ex4(manual_backward, *ex4_inputs)
    assert run.error is None
    assert list(run.grads) == spec.EX4_PARAMETERS == list(run.reference)
    for gradient in EX4:
        v = grading.ex4_verdict(gradient, run)
        assert v.score == v.max_score == 1.0, v.text()
        assert v.text().startswith(f"PASS {gradient.grade_id}")


def test_run_ex4_reference_is_autograd_of_cross_entropy(ex4_inputs):
    params, Xb, Yb = ex4_inputs
    run = grading.run_ex4(manual_backward, params, Xb, Yb)
    leaves = {k: t.clone().requires_grad_(True) for k, t in params.items()}
    v = lecture.forward(leaves, Xb, Yb, track=True)     # the chunked forward: same loss
    v["loss"].backward()
    for name in spec.EX4_PARAMETERS:
        torch.testing.assert_close(run.reference[name], v[name].grad, rtol=1e-4, atol=1e-7)


def test_run_ex4_does_not_touch_the_parameters(ex4_inputs):
    params, Xb, Yb = ex4_inputs
    before = {k: t.clone() for k, t in params.items()}

    def vandal(**kw):
        out = manual_backward(**kw)
        for t in kw.values():
            if t.is_floating_point():
                t.mul_(0)
        return out

    run = grading.run_ex4(vandal, params, Xb, Yb)
    assert run.error is None
    for k, t in params.items():
        assert torch.equal(t, before[k]) and not t.requires_grad


def test_run_ex4_with_a_function_that_raises(ex4_inputs):
    def broken(Xb, Yb, logits, **kw):
        raise ValueError("shapes do not line up")

    run = grading.run_ex4(broken, *ex4_inputs)
    assert "ValueError" in run.error and "shapes do not line up" in run.error
    assert spec.EX4_FUNCTION in run.error
    assert all(g is MISSING for g in run.grads.values())
    for gradient in EX4:
        v = grading.ex4_verdict(gradient, run)
        assert v.score == 0.0 and v.max_score == 1.0
        assert v.lines == [run.error]
        assert v.text().startswith(f"FAIL {gradient.grade_id}: 0/1 points")


def test_run_ex4_with_a_function_that_returns_nothing(ex4_inputs):
    def forgot_return(**kw):
        manual_backward(**kw)

    run = grading.run_ex4(forgot_return, *ex4_inputs)
    assert run.error and spec.EX4_FUNCTION in run.error
    assert all(grading.ex4_verdict(g, run).score == 0.0 for g in EX4)


@pytest.mark.parametrize("fn", [None, MISSING, 42, "manual_backward"])
def test_run_ex4_with_a_non_callable(ex4_inputs, fn):
    run = grading.run_ex4(fn, *ex4_inputs)
    assert run.error == f"{spec.EX4_FUNCTION} is not defined as a function"
    for gradient in EX4:
        v = grading.ex4_verdict(gradient, run)
        assert v.score == 0.0 and run.error in v.text()


@pytest.mark.parametrize("count", [6, 8])
def test_run_ex4_with_a_wrong_number_of_values(ex4_inputs, count):
    def returns(**kw):
        grads = manual_backward(**kw)
        return (grads + grads)[:count]

    run = grading.run_ex4(returns, *ex4_inputs)
    assert f"returned {count} values, expected 7" in run.error
    assert "dC" in run.error and "dbnbias" in run.error
    assert all(grading.ex4_verdict(g, run).score == 0.0 for g in EX4)


def test_run_ex4_passes_every_argument_to_kwargs(ex4_inputs):
    seen = {}

    def flexible(**kwargs):
        seen.update(kwargs)
        seen["grad_enabled"] = torch.is_grad_enabled()
        return manual_backward(**kwargs)

    run = grading.run_ex4(flexible, *ex4_inputs)
    assert run.error is None
    assert set(seen) - {"grad_enabled"} == set(spec.EX4_ARGUMENTS)
    assert seen["grad_enabled"] is False          # as in the notebook: under torch.no_grad()
    assert not any(seen[k].requires_grad for k in spec.EX4_ARGUMENTS if isinstance(seen[k], torch.Tensor))
    assert all(grading.ex4_verdict(g, run).score == 1.0 for g in EX4)


def test_run_ex4_passes_only_the_named_arguments(ex4_inputs):
    seen = []

    def partial(Xb, Yb, emb, embcat, hprebn, bnvar_inv, bnraw, h, logits, C, W1, W2, bngain,
                b1=None, b2=None, bnbias=None):
        seen.append(b1 is not None and b2 is not None and bnbias is not None)
        return manual_backward(Xb, Yb, emb, embcat, hprebn, bnvar_inv, bnraw, h, logits,
                               C, W1, b1, W2, b2, bngain, bnbias)

    run = grading.run_ex4(partial, *ex4_inputs)
    assert run.error is None and seen == [True]


def test_run_ex4_with_a_signature_that_needs_more(ex4_inputs):
    def needs_lr(Xb, Yb, lr):
        return []

    run = grading.run_ex4(needs_lr, *ex4_inputs)
    assert "TypeError" in run.error


def test_run_ex4_with_one_wrong_gradient(ex4_inputs):
    def bessel_less(**kw):
        grads = manual_backward(**kw)
        grads[5] = grads[5] * 31 / 32       # dbngain
        return grads

    run = grading.run_ex4(bessel_less, *ex4_inputs)
    scores = {g.name: grading.ex4_verdict(g, run).score for g in EX4}
    assert scores == {"dC": 1.0, "dW1": 1.0, "db1": 1.0, "dW2": 1.0, "db2": 1.0,
                      "dbngain": 0.0, "dbnbias": 1.0}


# ---------------------------------------------------------------- training_verdict
def log10s(losses):
    return [math.log10(x) for x in losses]


def test_training_with_falling_losses_passes():
    losses = [3.3 - 0.8 * i / 999 for i in range(1000)]      # 3.3 -> 2.5
    v = grading.training_verdict(log10s(losses), initial_loss=3.3)
    assert v.grade_id == spec.TRAINING.grade_id
    assert v.score == v.max_score == spec.TRAINING.points
    assert v.text().startswith("PASS ex4_training: 1/1 points")
    assert "3.300" in v.text() and "3.000" in v.text()


def test_training_with_flat_losses_fails():
    v = grading.training_verdict(log10s([3.3] * 1000), initial_loss=3.3)
    assert v.score == 0.0
    assert v.text().startswith("FAIL ex4_training: 0/1 points")
    assert "needs to fall below 3.000" in v.text()


def test_training_judges_the_tail_not_the_start():
    early_drop = log10s([2.0] * 900 + [3.3] * 100)       # fell, then diverged back up
    late_drop = log10s([3.3] * 900 + [2.5] * 100)
    assert grading.training_verdict(early_drop, initial_loss=3.3).score == 0.0
    assert grading.training_verdict(late_drop, initial_loss=3.3).score == 1.0


def test_training_that_falls_too_little_fails():
    v = grading.training_verdict(log10s([3.1] * 100), initial_loss=3.3)
    assert v.score == 0.0


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_training_with_nan_fails(bad):
    lossi = log10s([3.3 - 0.001 * i for i in range(900)]) + [bad] * 100
    v = grading.training_verdict(lossi, initial_loss=3.3)
    assert v.score == 0.0
    assert "NaN or inf" in v.text()


@pytest.mark.parametrize("lossi", [[], None])
def test_training_with_no_losses_fails(lossi):
    v = grading.training_verdict(lossi, initial_loss=3.3)
    assert v.score == 0.0 and v.max_score == 1.0
    assert "no loss" in v.text()
