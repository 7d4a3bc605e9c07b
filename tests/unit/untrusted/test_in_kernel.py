"""grader/untrusted/in_kernel.py, through the notebook's entry point `from grader.incell import
grade`: what the hidden test cells call inside the student's kernel.

nbgrader reads the cell's result as the score and gives 0 to a cell that writes to stderr,
so grade() must return a plain float in [0, points], print its verdict, and stay quiet.
"""

from __future__ import annotations

import math
import sys
import warnings

import pytest
import torch
import torch.nn.functional as F

from grader.exercise import spec
from grader.exercise.definitions import backprop_ninja as lecture
from grader.exercise.definitions.backprop_ninja import network
from grader.exercise.verdict import Verdict
from grader.incell import grade
from grader.reference.backprop_ninja import rules
from grader.untrusted import in_kernel

from conftest import manual_backward

EX1 = [g for g in spec.GRADIENTS if g.exercise == 1]


def test_the_notebooks_entry_point_is_in_kernel_grade():
    """The hidden test cells run `from grader.incell import grade` (an exercise written from its
    definition, `grade_gradient` and `grade_training`): stable names, visible in the sandbox, for
    grader/untrusted/in_kernel.py's."""
    import grader.incell

    assert grade is in_kernel.grade and grader.incell.grade_gradient is in_kernel.grade_gradient
    assert grader.incell.grade_training is in_kernel.grade_training
    assert grader.incell.__all__ == ["grade", "grade_gradient", "grade_training"]


def notebook_namespace(seed: int = lecture.LECTURE_SEED) -> dict:
    """globals() after the notebook's forward and `loss.backward()` cells."""
    params, g = network.init_params(seed=seed)
    Xb = torch.randint(0, 27, (32, 3), generator=g)
    Yb = torch.randint(0, 27, (32,), generator=g)
    v = rules.forward(params, Xb, Yb, track=True)
    v["loss"].backward()
    ns = dict(v)
    ns.update(torch=torch, F=F, batch_size=32)
    return ns


@pytest.fixture(scope="module")
def _notebook() -> dict:
    return notebook_namespace()


@pytest.fixture
def ns(_notebook) -> dict:
    """A fresh globals() per test; the tensors are shared, so tests only rebind names."""
    return dict(_notebook)


@pytest.fixture(scope="module")
def correct(_notebook) -> dict:
    """A student's exercise 1, by the step rules (not autograd's .grad)."""
    values = {k: (t.detach() if isinstance(t, torch.Tensor) else t) for k, t in _notebook.items()}
    return {"d" + k: t for k, t in rules.manual_grads(values)[0].items()}


# ---------------------------------------------------------------- scores
def test_correct_dlogprobs_passes(ns, capsys):
    dlogprobs = torch.zeros_like(ns["logprobs"])
    dlogprobs[range(ns["n"]), ns["Yb"]] = -1.0 / ns["n"]
    ns["dlogprobs"] = dlogprobs
    score = grade("ex1_dlogprobs", ns)
    assert type(score) is float and score == 1.0
    out, err = capsys.readouterr()
    assert out.startswith("PASS ex1_dlogprobs: 1/1 points")
    assert "exact: True" in out
    assert err == ""


@pytest.mark.parametrize("gradient", EX1, ids=lambda g: g.grade_id)
def test_every_exercise_1_cell_passes_a_correct_answer(ns, correct, gradient, capsys):
    ns.update(correct)
    assert grade(gradient.grade_id, ns) == gradient.points
    assert capsys.readouterr().out.startswith("PASS")


def test_wrong_dlogprobs_fails(ns, capsys):
    ns["dlogprobs"] = ns["logprobs"].grad * 2
    score = grade("ex1_dlogprobs", ns)
    assert type(score) is float and score == 0.0
    out, err = capsys.readouterr()
    assert out.startswith("FAIL ex1_dlogprobs: 0/1 points") and "approximate: False" in out
    assert err == ""


def test_dlogprobs_sign_flip_fails(ns, capsys):
    ns["dlogprobs"] = -ns["logprobs"].grad
    assert grade("ex1_dlogprobs", ns) == 0.0


def test_missing_variable(ns, capsys):
    assert "dlogprobs" not in ns
    score = grade("ex1_dlogprobs", ns)
    assert type(score) is float and score == 0.0
    out, err = capsys.readouterr()
    assert out.startswith("FAIL ex1_dlogprobs: 0/1 points")
    assert "dlogprobs is not defined" in out
    assert err == ""


@pytest.mark.parametrize(
    "value, words",
    [
        (None, ["None", "(32, 27)"]),
        ([0.0], ["not a torch tensor"]),
        (torch.zeros(27, 32), ["wrong shape (27, 32)", "(32, 27)"]),
        (torch.full((32, 27), float("nan")), ["NaN or inf"]),
    ],
)
def test_problem_values_score_zero_with_a_message(ns, capsys, value, words):
    ns["dlogprobs"] = value
    assert grade("ex1_dlogprobs", ns) == 0.0
    out, err = capsys.readouterr()
    for word in words:
        assert word in out
    assert err == ""


def test_target_without_grad(ns, capsys):
    """The student skipped the backward cell: a message and 0, never an exception."""
    ns["logprobs"] = ns["logprobs"].detach()
    ns["dlogprobs"] = torch.zeros(32, 27)
    score = grade("ex1_dlogprobs", ns)
    assert type(score) is float and score == 0.0
    out, err = capsys.readouterr()
    assert out.startswith("FAIL ex1_dlogprobs: 0/1 points")
    assert "logprobs.grad" in out and "backward" in out
    assert err == ""


def test_target_not_defined(ns, capsys):
    del ns["logprobs"]
    ns["dlogprobs"] = torch.zeros(32, 27)
    assert grade("ex1_dlogprobs", ns) == 0.0
    assert "FAIL ex1_dlogprobs" in capsys.readouterr().out


def test_an_exception_in_the_verdict_costs_this_cell_only(ns, capsys, monkeypatch):
    def explode(*args, **kwargs):
        raise KeyError("boom")

    monkeypatch.setattr(in_kernel, "gradient_verdict", explode)
    assert grade("ex1_dlogprobs", ns) == 0.0
    out, err = capsys.readouterr()
    assert "could not grade" in out and "KeyError" in out
    assert err == ""


# ---------------------------------------------------------------- quiet
def test_warnings_and_stderr_in_the_verdict_code_stay_silent(ns, correct, capsys, monkeypatch):
    real = in_kernel.gradient_verdict
    calls = []

    def noisy(*args, **kwargs):
        calls.append(args[0].grade_id)
        warnings.warn("a torch-like UserWarning", UserWarning, stacklevel=1)
        warnings.warn("a deprecation", DeprecationWarning, stacklevel=1)
        print("something on stderr", file=sys.stderr)
        return real(*args, **kwargs)

    monkeypatch.setattr(in_kernel, "gradient_verdict", noisy)
    ns.update(correct)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        score = grade("ex1_dlogprobs", ns)
    assert calls == ["ex1_dlogprobs"]  # the noisy code did run
    assert score == 1.0  # and cost nothing
    assert caught == []
    out, err = capsys.readouterr()
    assert err == ""
    assert out.startswith("PASS ex1_dlogprobs")
    assert "something on stderr" not in out


def test_silencing_does_not_outlive_the_call(ns, correct, capsys, monkeypatch):
    stderr = sys.stderr
    ns.update(correct)
    grade("ex1_dlogprobs", ns)
    assert sys.stderr is stderr
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.warn("after grading", UserWarning, stacklevel=1)
    assert len(caught) == 1


# ---------------------------------------------------------------- bounds
@pytest.mark.parametrize("claimed", [5.0, 1.5, -1.0, -0.0])
def test_score_stays_within_the_cells_points(ns, capsys, monkeypatch, claimed):
    def overgenerous(gradient, value, reference):
        return Verdict(gradient.grade_id, claimed, gradient.points, [])

    monkeypatch.setattr(in_kernel, "gradient_verdict", overgenerous)
    score = grade("ex1_dlogprobs", ns)
    assert type(score) is float
    assert 0.0 <= score <= spec.BY_GRADE_ID["ex1_dlogprobs"].points
    assert score == min(max(claimed, 0.0), 1.0)


@pytest.mark.parametrize("grade_id", ["ex2_dlogits", "ex3_dhprebn"])
def test_two_point_cells(ns, correct, capsys, grade_id):
    ns.update(correct)
    score = grade(grade_id, ns)
    assert score == spec.BY_GRADE_ID[grade_id].points == 2.0
    assert "2/2 points" in capsys.readouterr().out


# ---------------------------------------------------------------- exercise 4
@pytest.fixture
def ex4_ns() -> dict:
    """What exercise 4's cells leave behind: the data, manual_backward and lossi."""
    g = torch.Generator().manual_seed(5)
    return {
        "itos": {i: chr(96 + i) if i else "." for i in range(27)},
        "Xtr": torch.randint(0, 27, (1000, 3), generator=g),
        "Ytr": torch.randint(0, 27, (1000,), generator=g),
        "manual_backward": manual_backward,
    }


@pytest.mark.parametrize("gradient", [g for g in spec.GRADIENTS if g.exercise == 4], ids=lambda g: g.grade_id)
def test_ex4_correct_backward_passes(ex4_ns, capsys, gradient):
    assert grade(gradient.grade_id, ex4_ns) == 1.0
    out, err = capsys.readouterr()
    assert out.startswith(f"PASS {gradient.grade_id}") and err == ""


def test_ex4_broken_backward_fails_every_cell(ex4_ns, capsys):
    def broken(**kw):
        raise ZeroDivisionError("oops")

    ex4_ns["manual_backward"] = broken
    for gradient in (g for g in spec.GRADIENTS if g.exercise == 4):
        assert grade(gradient.grade_id, ex4_ns) == 0.0
        out, err = capsys.readouterr()
        assert "ZeroDivisionError" in out and err == ""


def test_ex4_training_cell(ex4_ns, capsys):
    initial = in_kernel._ex4_initial_loss(ex4_ns)
    assert math.isfinite(initial) and 3.0 < initial < 4.5
    ex4_ns["lossi"] = [math.log10(initial - 0.5)] * 100
    assert grade("ex4_training", ex4_ns) == 1.0
    ex4_ns["lossi"] = [math.log10(initial)] * 100
    assert grade("ex4_training", ex4_ns) == 0.0
    ex4_ns["lossi"] = [float("nan")] * 100
    assert grade("ex4_training", ex4_ns) == 0.0
    assert capsys.readouterr().err == ""


def test_a_fixed_helper_shows_at_once(ex4_ns):
    """No stale result: fixing a helper of manual_backward changes the next ex4 cell's verdict."""

    def manual_backward(**kw):
        return helper(kw)

    def broken(kw):
        raise ValueError("not yet")

    ns = dict(ex4_ns, manual_backward=manual_backward)
    helper = broken
    assert grade("ex4_db2", ns) == 0.0
    run = in_kernel.run_ex4(lambda **kw: None, *in_kernel._check_inputs(ns))
    helper = lambda kw: [run.reference[k] for k in spec.PARAMETERS]  # noqa: E731
    assert grade("ex4_db1", ns) == 1.0
