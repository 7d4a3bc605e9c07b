"""grader/exercise/compare.py: the one place a match is decided, and the sentence a student reads."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from grader.exercise.compare import ATOL, MISSING, RTOL, Comparison, as_reference_shape, compare
from grader.exercise.definitions.backprop_ninja import network
from grader.reference.backprop_ninja import rules


@pytest.fixture(scope="module")
def grads():
    """Autograd's gradients for a batch of the lecture's network: realistic references."""
    params, _ = network.init_params()
    g = torch.Generator().manual_seed(0)
    Xb = torch.randint(0, 27, (32, 3), generator=g)
    Yb = torch.randint(0, 27, (32,), generator=g)
    return rules.autograd_grads(params, Xb, Yb)[1]


def reference(*shape, seed=0, scale=0.01):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)) * scale


# ---------------------------------------------------------------- matches
def test_exact_match():
    ref = reference(32, 27)
    c = compare("dlogits", ref.clone(), ref)
    assert (c.ok, c.problem, c.exact, c.approx, c.maxdiff) == (True, None, True, True, 0.0)
    assert c.shape == c.expected_shape == (32, 27)
    assert c.notes == ()


def test_approximate_match():
    ref = reference(32, 27)
    noise = torch.randn(ref.shape, generator=torch.Generator().manual_seed(1)) * 1e-9
    c = compare("dlogits", ref + noise, ref)
    assert c.ok and c.approx and c.problem is None
    assert not c.exact
    assert 0 < c.maxdiff < 1e-8


def test_tolerances_are_allclose_level():
    assert RTOL <= 1e-4 and ATOL <= 1e-6


def test_bessel_mistake_fails(grads):
    """Dividing by n instead of n-1 scales dbndiff2 by 31/32: 3% off, far above float noise."""
    ref = grads["bndiff2"]
    c = compare("dbndiff2", ref * 31 / 32, ref)
    assert not c.ok and not c.approx and not c.exact
    assert c.problem == "mismatch"
    assert c.maxdiff == pytest.approx(float(ref.abs().max()) / 32, rel=1e-3)


@pytest.mark.parametrize("name", ["bnvar", "bnvar_inv", "bndiff", "hprebn", "W1", "C"])
def test_bessel_factor_fails_on_every_batchnorm_gradient(grads, name):
    ref = grads[name]
    assert not compare("d" + name, ref * 31 / 32, ref).ok


def test_mismatch_of_a_single_entry_fails():
    ref = reference(32, 27)
    wrong = ref.clone()
    wrong[3, 5] += 1e-3
    c = compare("dprobs", wrong, ref)
    assert not c.ok and c.problem == "mismatch"
    assert c.maxdiff == pytest.approx(1e-3, rel=1e-3)


def test_float64_and_requires_grad_values_are_accepted():
    ref = reference(64, 27)
    value = ref.double().requires_grad_(True)
    c = compare("dW2", value, ref)
    assert c.ok and c.exact


def test_integer_tensor_of_the_right_values_is_accepted():
    ref = torch.tensor([[0.0, 1.0, -2.0], [3.0, 0.0, 5.0]])
    c = compare("dcounts", ref.to(torch.int64), ref)
    assert c.ok and c.exact and c.problem is None


# ---------------------------------------------------------------- problems
def test_missing():
    c = compare("dlogprobs", MISSING, reference(32, 27))
    assert not c.ok and c.problem == "missing"
    assert c.expected_shape == (32, 27)


def test_none():
    c = compare("dbngain", None, reference(1, 64))
    assert not c.ok and c.problem == "none"


@pytest.mark.parametrize(
    "value, type_name",
    [
        ([[0.0] * 27] * 32, "list"),
        (np.zeros((32, 27), dtype=np.float32), "ndarray"),
        (0.5, "float"),
    ],
)
def test_not_a_tensor(value, type_name):
    c = compare("dlogits", value, reference(32, 27))
    assert not c.ok and c.problem == "not_tensor"
    assert any(type_name in note for note in c.notes)


@pytest.mark.parametrize("shape", [(32, 64), (64, 32), (64, 1, 2), (63,)])
def test_wrong_shape(shape):
    c = compare("dbngain", torch.zeros(shape), reference(1, 64))
    assert not c.ok and c.problem == "shape"
    assert c.shape == shape and c.expected_shape == (1, 64)


@pytest.mark.parametrize(
    "value_shape, ref_shape", [((64,), (1, 64)), ((1, 64), (64,)), ((32,), (32, 1)), ((27, 1), (27,))]
)
def test_keepdim_difference_is_accepted_with_a_note(value_shape, ref_shape):
    ref = reference(*ref_shape)
    c = compare("dbnbias", ref.reshape(value_shape), ref)
    assert c.ok and c.exact
    assert c.shape == value_shape and c.expected_shape == ref_shape
    assert len(c.notes) == 1 and "size-1" in c.notes[0]


def test_keepdim_difference_with_wrong_values_still_fails():
    ref = reference(1, 64)
    c = compare("dbnbias", (ref * 2).reshape(64), ref)
    assert not c.ok and c.problem == "mismatch"


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_nonfinite(bad):
    ref = reference(32, 27)
    value = ref.clone()
    value[0, 0] = bad
    c = compare("dcounts", value, ref)
    assert not c.ok and c.problem == "nonfinite"


def test_all_nan_value_fails():
    """NaN compares unequal to everything: make sure it is not slipped through as \"no diff\"."""
    ref = reference(32, 27)
    assert not compare("dcounts", torch.full_like(ref, float("nan")), ref).ok


def test_zero_ok_reason_note(grads):
    ref = grads["logit_maxes"]  # autograd's float noise, ~1e-9
    assert 0 < float(ref.abs().max()) < 1e-7
    reason = "the max trick does not change the loss"
    c = compare("dlogit_maxes", torch.zeros_like(ref), ref, zero_ok_reason=reason)
    assert c.ok and not c.exact
    assert any(reason in note and "zero" in note for note in c.notes)
    assert reason in c.line()
    assert compare("dlogit_maxes", torch.zeros_like(ref), ref).notes == ()


def test_zero_ok_reason_does_not_accept_a_wrong_answer():
    ref = reference(32, 1)
    c = compare("dlogit_maxes", ref + 1.0, ref, zero_ok_reason="the max trick")
    assert not c.ok and c.problem == "mismatch"


# ---------------------------------------------------------------- what the student reads
def test_line_for_a_match():
    ref = reference(32, 27)
    line = compare("dlogits", ref.clone(), ref).line()
    assert line.startswith("dlogits")
    for part in ("exact: True", "approximate: True", "maxdiff: 0", "(32, 27)"):
        assert part in line


def test_line_for_a_mismatch():
    ref = reference(32, 27)
    line = compare("dprobs", ref * 2, ref).line()
    for part in ("dprobs", "exact: False", "approximate: False", "maxdiff", "(32, 27)"):
        assert part in line


def test_line_shows_the_students_shape_and_the_note():
    ref = reference(1, 64)
    line = compare("dbngain", ref.reshape(64), ref).line()
    assert "shape (64,)" in line and "size-1" in line


def _problem(kind):
    """A comparison with the given problem, for the dbngain of shape (1, 64)."""
    ref = reference(1, 64)
    value = {
        "missing": MISSING,
        "none": None,
        "not_tensor": [1.0] * 64,
        "shape": torch.zeros(32, 64),
        "nonfinite": torch.full((1, 64), float("nan")),
        "mismatch": ref * 2,
    }[kind]
    c = compare("dbngain", value, ref)
    assert c.problem == kind
    return c


@pytest.mark.parametrize(
    "kind, expected_words",
    [
        ("missing", ["dbngain", "not defined"]),
        ("none", ["dbngain", "None", "(1, 64)"]),
        ("not_tensor", ["dbngain", "not a torch tensor"]),
        ("shape", ["(32, 64)", "(1, 64)"]),
        ("nonfinite", ["dbngain", "NaN or inf"]),
        ("mismatch", ["differ", "maxdiff"]),
    ],
)
def test_message_is_a_clear_sentence(kind, expected_words):
    message = _problem(kind).message()
    assert isinstance(message, str) and message
    for word in expected_words:
        assert word in message
    assert "dbngain" in message or "(1, 64)" in message or kind == "mismatch"


@pytest.mark.parametrize("kind", ["missing", "none", "not_tensor", "shape", "nonfinite"])
def test_line_for_a_problem_carries_name_and_message(kind):
    c = _problem(kind)
    line = c.line()
    assert line.startswith("dbngain")
    assert c.message() in line


def test_message_of_a_match():
    ref = reference(3)
    assert compare("db2", ref.clone(), ref).message() == "matches the reference"


def test_comparison_defaults():
    c = Comparison("dX", True)
    assert c.problem is None and c.notes == ()


# ---------------------------------------------------------------- as_reference_shape
def test_as_reference_shape_same_shape_is_the_same_tensor():
    value = torch.zeros(32, 27)
    assert as_reference_shape(value, torch.Size([32, 27])) is value


@pytest.mark.parametrize(
    "value_shape, expected",
    [
        ((64,), (1, 64)),
        ((1, 64), (64,)),
        ((32, 1), (32,)),
        ((1, 1, 64), (1, 64)),
        ((), (1,)),
        ((1,), ()),
    ],
)
def test_as_reference_shape_fits_size_1_differences(value_shape, expected):
    value = torch.arange(int(torch.Size(value_shape).numel()), dtype=torch.float32).reshape(value_shape)
    fitted = as_reference_shape(value, torch.Size(expected))
    assert fitted is not None and tuple(fitted.shape) == expected
    assert fitted.flatten().tolist() == value.flatten().tolist()


@pytest.mark.parametrize(
    "value_shape, expected",
    [
        ((32, 64), (1, 64)),
        ((27, 32), (32, 27)),
        ((64,), (1, 63)),
        ((2, 32), (64,)),
    ],
)
def test_as_reference_shape_rejects_other_shapes(value_shape, expected):
    assert as_reference_shape(torch.zeros(value_shape), torch.Size(expected)) is None
