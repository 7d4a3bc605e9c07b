"""grader/reference/steps.py: the lecture's chunked forward pass and its step-by-step backward
rules. Every backward rule is checked against torch autograd (as micrograd's tests do), and
the graph's structure (consumers, upstream) the replay's run order relies on."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from grader.exercise import spec
from grader.exercise.definitions import backprop_ninja as lecture
from grader.exercise.definitions.backprop_ninja import network
from grader.reference import steps
from grader.reference.backprop_ninja import rules

from conftest import synthetic_batch

# Exercise 1's order, as the grader (and the notebook) walks it.
EX1_ORDER = [g.target for g in spec.GRADIENTS if g.exercise == 1]
STEP_OUTPUTS = [s.out for s in rules.STEPS if s.out != "loss"]
# Tensors the forward pass reads twice: their gradient is the sum of two branches.
USED_TWICE = ["counts", "bndiff", "hprebn", "logits"]
OTHER_SEEDS = [0, 42, 1337]


def both_grads(params, Xb, Yb):
    values, auto = rules.autograd_grads(params, Xb, Yb)
    manual, branches = rules.manual_grads(values)
    return values, auto, manual, branches


def assert_grads_close(manual: dict, auto: dict, atol: float):
    assert set(manual) == set(auto) == set(STEP_OUTPUTS) | set(spec.PARAMETERS)
    for name in auto:
        torch.testing.assert_close(
            manual[name], auto[name], rtol=0.0, atol=atol, msg=lambda m, name=name: f"d{name}: {m}"
        )


# ---------------------------------------------------------------- backward rules vs autograd
def test_manual_grads_match_autograd_for_the_lecture_batch(lecture_batch):
    _, auto, manual, _ = both_grads(*lecture_batch)
    assert_grads_close(manual, auto, atol=1e-7)


@pytest.mark.parametrize(
    "n_hidden, batch_size",
    [
        (lecture.N_HIDDEN, 32),
        (lecture.N_HIDDEN_TRAIN, 32),
        (lecture.N_HIDDEN, 7),
        (lecture.N_HIDDEN_TRAIN, 7),
    ],
)
@pytest.mark.parametrize("seed", [lecture.LECTURE_SEED, *OTHER_SEEDS])
def test_manual_grads_match_autograd(seed, n_hidden, batch_size):
    params, _ = network.init_params(seed=seed, n_hidden=n_hidden)
    _, auto, manual, _ = both_grads(params, *synthetic_batch(seed, batch_size))
    assert auto["W1"].shape == (lecture.N_EMBD * lecture.BLOCK_SIZE, n_hidden)
    assert auto["logprobs"].shape == (batch_size, 27)
    assert_grads_close(manual, auto, atol=1e-7)


@pytest.mark.parametrize("seed", [lecture.LECTURE_SEED, *OTHER_SEEDS])
def test_manual_grads_match_autograd_in_float64(seed):
    """In double precision rounding is ~1e-16, so even a rule wrong by 1e-6 relative shows."""
    params, _ = network.init_params(seed=seed)
    params = {k: t.double() for k, t in params.items()}
    _, auto, manual, _ = both_grads(params, *synthetic_batch(seed, 32))
    assert all(t.dtype == torch.float64 for t in manual.values())
    assert_grads_close(manual, auto, atol=1e-12)


def test_a_wrong_rule_is_caught(monkeypatch):
    """The comparison above has teeth: Bessel's n instead of n-1 in bnvar's rule fails it."""
    bessel_less = dataclasses.replace(
        rules.STEP_OF["bnvar"],
        backward=lambda v, d: {"bndiff2": torch.ones_like(v["bndiff2"]) * d / rules._n(v)},
    )
    monkeypatch.setattr(rules, "STEPS", [bessel_less if s.out == "bnvar" else s for s in rules.STEPS])
    params, _ = network.init_params()
    _, auto, manual, _ = both_grads(params, *synthetic_batch(0, 32))
    # Closer to the loss nothing changes; from bndiff2 down everything is off by ~3%.
    for name in ("logprobs", "hpreact", "bnvar"):
        torch.testing.assert_close(manual[name], auto[name], rtol=0.0, atol=1e-7)
    for name in ("bndiff2", "bndiff", "hprebn", "W1", "C"):
        assert not torch.allclose(manual[name], auto[name], rtol=0, atol=1e-7), name


def test_bit_exact_from_logprobs_through_b2(lecture_batch):
    """As in the lecture: the first eleven gradients come out bit-for-bit like autograd's."""
    _, auto, manual, _ = both_grads(*lecture_batch)
    through_b2 = EX1_ORDER[: EX1_ORDER.index("b2") + 1]
    assert through_b2[0] == "logprobs" and len(through_b2) == 11
    for name in through_b2:
        assert torch.equal(manual[name], auto[name]), f"d{name} is not bit-exact"


# ---------------------------------------------------------------- branches
@pytest.mark.parametrize("name", USED_TWICE)
def test_two_branches_sum_to_the_gradient(name):
    params, _ = network.init_params()
    _, auto, manual, branches = both_grads(params, *synthetic_batch(lecture.LECTURE_SEED, 32))
    assert len(branches[name]) == 2
    assert set(branches[name]) == set(spec.EXERCISE.consumers(name))
    first, second = branches[name].values()
    assert torch.equal(first + second, manual[name])
    torch.testing.assert_close(first + second, auto[name], rtol=0.0, atol=1e-7)
    # forgetting either branch is a wrong answer, except the max trick's branch, which is
    # mathematically zero (the grader accepts dlogits without it)
    for consumer, branch in branches[name].items():
        alone_passes = torch.allclose(branch, auto[name], rtol=1e-4, atol=1e-6)
        assert alone_passes == ((name, consumer) == ("logits", "norm_logits")), consumer


def test_every_other_tensor_has_one_branch():
    params, _ = network.init_params()
    _, _, manual, branches = both_grads(params, *synthetic_batch(0, 32))
    assert set(branches) == set(manual)
    for name, contributions in branches.items():
        assert len(contributions) == (2 if name in USED_TWICE else 1), (name, list(contributions))
        assert set(contributions) == set(spec.EXERCISE.consumers(name)), name


# ---------------------------------------------------------------- graph structure
@pytest.mark.parametrize(
    "name, expected",
    [
        ("hprebn", ["bnmeani", "bndiff"]),
        ("counts", ["counts_sum", "probs"]),
        ("logits", ["logit_maxes", "norm_logits"]),
        ("bndiff", ["bndiff2", "bnraw"]),
        ("logprobs", ["loss"]),
        ("W1", ["hprebn"]),
        ("bngain", ["hpreact"]),
        ("loss", []),
    ],
)
def test_consumers(name, expected):
    assert spec.EXERCISE.consumers(name) == expected


@pytest.mark.parametrize(
    "name, expected",
    [
        ("counts", {"logprobs", "probs", "counts_sum_inv", "counts_sum"}),
        ("logprobs", set()),
        ("loss", set()),
        ("probs", {"logprobs"}),
        (
            "W2",
            {
                "logits",
                "logit_maxes",
                "norm_logits",
                "counts",
                "counts_sum",
                "counts_sum_inv",
                "probs",
                "logprobs",
            },
        ),
        ("C", set(STEP_OUTPUTS)),
    ],
)
def test_upstream(name, expected):
    assert spec.EXERCISE.upstream(name) == expected


def test_exercise_1_covers_every_tensor_once():
    assert len(EX1_ORDER) == len(set(EX1_ORDER))
    assert set(EX1_ORDER) == set(STEP_OUTPUTS) | set(spec.PARAMETERS)


@pytest.mark.parametrize("gradient", [g for g in spec.GRADIENTS if g.exercise == 1], ids=lambda g: g.grade_id)
def test_exercise_1_order_is_a_backward_order(gradient):
    """Each gradient only needs gradients graded before it: the grader relies on this."""
    position = EX1_ORDER.index(gradient.target)
    for up in spec.EXERCISE.upstream(gradient.target):
        assert EX1_ORDER.index(up) < position, f"d{up} is needed by {gradient.name} but comes later"


def test_each_branchs_share_by_autograd_is_the_rules(lecture_batch):
    """The missing-branch hint's references come from autograd alone (a new exercise has no
    rules): for every tensor read twice, each reader's share equals what its rule gives."""
    values, grads = rules.autograd_grads(*lecture_batch)
    shares = steps.autograd_branches(values, grads, spec.EXERCISE)
    _, by_rules = rules.manual_grads(values)
    assert sorted(shares) == sorted(k for k, v in by_rules.items() if len(v) > 1)
    assert sorted(shares) == ["bndiff", "counts", "hprebn", "logits"]
    for name, readers in shares.items():
        assert set(readers) == set(by_rules[name]), name
        for reader, share in readers.items():
            torch.testing.assert_close(share, by_rules[name][reader], rtol=1e-5, atol=1e-8)
