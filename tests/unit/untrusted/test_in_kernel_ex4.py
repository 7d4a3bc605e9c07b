"""grader/untrusted/in_kernel.py's exercise 4, in-process: the student's manual_backward called
once (run_ex4, through grader/untrusted/backward_call.py) and judged against autograd, and the
kernel's check of the training loop (training_verdict on the recorded losses)."""

from __future__ import annotations

import math

import pytest
import torch

from grader.exercise import spec
from grader.exercise.compare import MISSING
from grader.exercise.definitions import backprop_ninja as lecture
from grader.exercise.definitions.backprop_ninja import network
from grader.reference.backprop_ninja import rules
from grader.untrusted import in_kernel

from conftest import manual_backward

EX4 = [g for g in spec.GRADIENTS if g.exercise == 4]


@pytest.fixture(scope="module")
def ex4_inputs():
    """What the kernel's check passes to run_ex4: exercise 4's parameters (200 hidden) and a batch."""
    params, g = network.init_params(n_hidden=lecture.N_HIDDEN_TRAIN)
    Xb = torch.randint(0, 27, (32, 3), generator=g)
    Yb = torch.randint(0, 27, (32,), generator=g)
    return params, Xb, Yb


# ---------------------------------------------------------------- a block of hidden tests
def test_a_block_of_hidden_tests_calls_manual_backward_once_and_judges_as_each_alone():
    calls = []

    def counted(**kwargs):
        calls.append(1)
        return manual_backward(**kwargs)

    g = torch.Generator().manual_seed(3)
    ns = {
        spec.EX4_FUNCTION: counted,
        "Xtr": torch.randint(0, 27, (500, 3), generator=g),
        "Ytr": torch.randint(0, 27, (500,), generator=g),
        "itos": {i: chr(96 + i) for i in range(27)},
    }
    alone = [in_kernel.grade(gradient.grade_id, ns) for gradient in EX4]
    assert len(calls) == len(EX4) == 7 and alone == [1.0] * 7
    calls.clear()
    with in_kernel.one_block():
        together = [in_kernel.grade(gradient.grade_id, ns) for gradient in EX4]
        ns[spec.EX4_FUNCTION] = lambda **kwargs: counted(**kwargs)  # another function: called again
        in_kernel.grade(EX4[0].grade_id, ns)
    assert together == alone and len(calls) == 2
    in_kernel.grade(EX4[0].grade_id, ns)  # a cell on its own, after the block: called afresh
    assert len(calls) == 3


# ---------------------------------------------------------------- run_ex4
def test_run_ex4_with_a_correct_backward(ex4_inputs):
    run = in_kernel.run_ex4(manual_backward, *ex4_inputs)
    assert run.error is None
    assert list(run.grads) == spec.PARAMETERS == list(run.reference)
    for gradient in EX4:
        v = in_kernel.ex4_verdict(gradient, run)
        assert v.score == v.max_score == 1.0, v.text()
        assert v.text().startswith(f"PASS {gradient.grade_id}")


def test_run_ex4_reference_is_autograd_of_cross_entropy(ex4_inputs):
    params, Xb, Yb = ex4_inputs
    run = in_kernel.run_ex4(manual_backward, params, Xb, Yb)
    leaves = {k: t.clone().requires_grad_(True) for k, t in params.items()}
    v = rules.forward(leaves, Xb, Yb, track=True)  # the chunked forward: same loss
    v["loss"].backward()
    for name in spec.PARAMETERS:
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

    run = in_kernel.run_ex4(vandal, params, Xb, Yb)
    assert run.error is None
    for k, t in params.items():
        assert torch.equal(t, before[k]) and not t.requires_grad


def test_run_ex4_with_a_function_that_raises(ex4_inputs):
    def broken(Xb, Yb, logits, **kw):
        raise ValueError("shapes do not line up")

    run = in_kernel.run_ex4(broken, *ex4_inputs)
    assert "ValueError" in run.error and "shapes do not line up" in run.error
    assert spec.EX4_FUNCTION in run.error
    assert all(g is MISSING for g in run.grads.values())
    for gradient in EX4:
        v = in_kernel.ex4_verdict(gradient, run)
        assert v.score == 0.0 and v.max_score == 1.0
        assert v.lines == [run.error]
        assert v.text().startswith(f"FAIL {gradient.grade_id}: 0/1 points")


def test_run_ex4_with_a_function_that_returns_nothing(ex4_inputs):
    def forgot_return(**kw):
        manual_backward(**kw)

    run = in_kernel.run_ex4(forgot_return, *ex4_inputs)
    assert run.error and spec.EX4_FUNCTION in run.error
    assert all(in_kernel.ex4_verdict(g, run).score == 0.0 for g in EX4)


@pytest.mark.parametrize("fn", [None, MISSING, 42, "manual_backward"])
def test_run_ex4_with_a_non_callable(ex4_inputs, fn):
    run = in_kernel.run_ex4(fn, *ex4_inputs)
    assert run.error == f"{spec.EX4_FUNCTION} is not defined as a function"
    for gradient in EX4:
        v = in_kernel.ex4_verdict(gradient, run)
        assert v.score == 0.0 and run.error in " ".join(v.lines)


@pytest.mark.parametrize("count", [6, 8])
def test_run_ex4_with_a_wrong_number_of_values(ex4_inputs, count):
    def returns(**kw):
        grads = manual_backward(**kw)
        return (grads + grads)[:count]

    run = in_kernel.run_ex4(returns, *ex4_inputs)
    assert f"returned {count} values, expected 7" in run.error
    assert "dC" in run.error and "dbnbias" in run.error
    assert all(in_kernel.ex4_verdict(g, run).score == 0.0 for g in EX4)


def test_run_ex4_passes_every_argument_to_kwargs(ex4_inputs):
    seen = {}

    def flexible(**kwargs):
        seen.update(kwargs)
        seen["grad_enabled"] = torch.is_grad_enabled()
        return manual_backward(**kwargs)

    run = in_kernel.run_ex4(flexible, *ex4_inputs)
    assert run.error is None
    assert set(seen) - {"grad_enabled"} == set(spec.EX4_ARGUMENTS)
    assert seen["grad_enabled"] is False  # as in the notebook: under torch.no_grad()
    assert not any(seen[k].requires_grad for k in spec.EX4_ARGUMENTS if isinstance(seen[k], torch.Tensor))
    assert all(in_kernel.ex4_verdict(g, run).score == 1.0 for g in EX4)


def test_run_ex4_passes_only_the_named_arguments(ex4_inputs):
    seen = []

    def partial(
        Xb,
        Yb,
        emb,
        embcat,
        hprebn,
        bnvar_inv,
        bnraw,
        h,
        logits,
        C,
        W1,
        W2,
        bngain,
        b1=None,
        b2=None,
        bnbias=None,
    ):
        seen.append(b1 is not None and b2 is not None and bnbias is not None)
        return manual_backward(
            Xb, Yb, emb, embcat, hprebn, bnvar_inv, bnraw, h, logits, C, W1, b1, W2, b2, bngain, bnbias
        )

    run = in_kernel.run_ex4(partial, *ex4_inputs)
    assert run.error is None and seen == [True]


def test_run_ex4_with_a_signature_that_needs_more(ex4_inputs):
    def needs_lr(Xb, Yb, lr):
        return []

    run = in_kernel.run_ex4(needs_lr, *ex4_inputs)
    assert "TypeError" in run.error


def test_run_ex4_with_one_wrong_gradient(ex4_inputs):
    def bessel_less(**kw):
        grads = manual_backward(**kw)
        grads[5] = grads[5] * 31 / 32  # dbngain
        return grads

    run = in_kernel.run_ex4(bessel_less, *ex4_inputs)
    scores = {g.name: in_kernel.ex4_verdict(g, run).score for g in EX4}
    assert scores == {
        "dC": 1.0,
        "dW1": 1.0,
        "db1": 1.0,
        "dW2": 1.0,
        "db2": 1.0,
        "dbngain": 0.0,
        "dbnbias": 1.0,
    }


# ---------------------------------------------------------------- training_verdict
def log10s(losses):
    return [math.log10(x) for x in losses]


def test_training_with_falling_losses_passes():
    losses = [3.3 - 0.8 * i / 999 for i in range(1000)]  # 3.3 -> 2.5
    v = in_kernel.training_verdict(log10s(losses), initial_loss=3.3)
    assert v.grade_id == spec.TRAINING.grade_id
    assert v.score == v.max_score == spec.TRAINING.points
    assert v.text().startswith("PASS ex4_training: 1/1 points")
    assert "3.300" in v.text() and "3.000" in v.text()


def test_training_with_flat_losses_fails():
    v = in_kernel.training_verdict(log10s([3.3] * 1000), initial_loss=3.3)
    assert v.score == 0.0
    assert v.text().startswith("FAIL ex4_training: 0/1 points")
    assert "needs to fall below 3.000" in " ".join(v.lines)


def test_training_judges_the_tail_not_the_start():
    early_drop = log10s([2.0] * 900 + [3.3] * 100)  # fell, then diverged back up
    late_drop = log10s([3.3] * 900 + [2.5] * 100)
    assert in_kernel.training_verdict(early_drop, initial_loss=3.3).score == 0.0
    assert in_kernel.training_verdict(late_drop, initial_loss=3.3).score == 1.0


def test_training_that_falls_too_little_fails():
    v = in_kernel.training_verdict(log10s([3.1] * 100), initial_loss=3.3)
    assert v.score == 0.0


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_training_with_nan_fails(bad):
    lossi = log10s([3.3 - 0.001 * i for i in range(900)]) + [bad] * 100
    v = in_kernel.training_verdict(lossi, initial_loss=3.3)
    assert v.score == 0.0
    assert "NaN or inf" in v.text()


@pytest.mark.parametrize("lossi", [[], None])
def test_training_with_no_losses_fails(lossi):
    v = in_kernel.training_verdict(lossi, initial_loss=3.3)
    assert v.score == 0.0 and v.max_score == 1.0
    assert "no loss" in v.text()
