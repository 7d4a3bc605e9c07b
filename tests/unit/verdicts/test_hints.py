"""grader/verdicts/hints.py and grading.decide on real tensors: the lecture's network on names.txt with a
seed of the grader's, autograd's gradients as the reference, and each classic mistake
built from them. Every hint must name the mistake that produced the value."""

from __future__ import annotations

import pytest
import torch

from grader.exercise import spec
from grader.exercise.compare import MISSING
from grader.exercise.definitions.backprop_ninja import network
from grader.exercise.verdict import compare_gradient
from grader.reference.backprop_ninja import rules
from grader.reference.backprop_ninja.mistakes import catalogue as known_mistakes
from grader.reference.inputs import dataset
from grader.verdicts import hints
from grader.verdicts.grading import NOTHING, decide, with_hint
from grader.verdicts.outcomes import Outcome

SEED = 4242
USED_TWICE = ["counts", "bndiff", "hprebn", "logits"]


@pytest.fixture(scope="module")
def lec(names_txt):
    """(values, autograd grads, manual grads, branches, n) on a batch of the real data."""
    ds = dataset(names_txt)
    params, g = network.init_params(seed=SEED, vocab_size=ds.vocab_size)
    Xb, Yb = network.draw_batch(ds.Xtr, ds.Ytr, g)
    values, grads = rules.autograd_grads(params, Xb, Yb)
    manual, branches = rules.manual_grads(values)
    return values, grads, manual, branches, Xb.shape[0]


# ---------------------------------------------------------------- value_hint: factors
FACTORS = [
    (lambda n: n / (n - 1), "n/(n-1)", "(n-1)/n"),
    (lambda n: (n - 1) / n, "(n-1)/n", "n/(n-1)"),
    (lambda n: float(n), "divide by n once", "not twice"),
    (lambda n: 1.0 / n, "not twice", "sign"),
    (lambda n: -1.0, "sign", "divide by n"),
]


@pytest.mark.parametrize("target", ["h", "W1", "hprebn"])
@pytest.mark.parametrize(
    "factor,expected,absent", FACTORS, ids=["n_over_n-1", "n-1_over_n", "n", "1_over_n", "minus_1"]
)
def test_value_hint_names_the_factor(lec, target, factor, expected, absent):
    _, grads, _, _, n = lec
    ref = grads[target]
    text = hints.value_hint("d" + target, ref * factor(n), ref, n=n)
    assert text.startswith("off by a factor of"), text
    assert expected in text and absent not in text, text


def test_value_hint_arbitrary_factor(lec):
    _, grads, _, _, n = lec
    text = hints.value_hint("dh", grads["h"] * 1.7, grads["h"], n=n)
    assert "constant factor of about 1.7" in text


def test_value_hint_not_a_factor(lec):
    _, grads, _, _, n = lec
    noise = 0.01 * torch.randn(grads["h"].shape, generator=torch.Generator().manual_seed(0))
    text = hints.value_hint("dh", grads["h"] + noise, grads["h"], n=n)
    assert text.startswith("values differ from the reference"), text


def test_value_hint_a_constant_added(lec):
    _, grads, _, _, n = lec
    assert "off by exactly 1" in hints.value_hint("dC", grads["C"] + 1.0, grads["C"], n=n)
    text = hints.value_hint("dh", grads["h"] + 0.01, grads["h"], n=n)
    assert "off by the same 0.01" in text, text


def test_value_hint_a_sum_for_a_product(lec):
    values, grads, _, _, n = lec
    local = 1.0 - values["h"] ** 2
    text = hints.value_hint("dhpreact", local + grads["h"], grads["hpreact"], n=n, upstream=grads["h"])
    assert "`*`, not `+`" in text, text


def test_value_hint_a_forward_tensor_as_a_factor(lec):
    values, grads, _, _, n = lec
    forward = {k: v for k, v in values.items() if isinstance(v, torch.Tensor)}
    wrong = grads["bndiff2"] * values["bndiff"] * (n - 1)
    text = hints.value_hint("dbndiff2", wrong, grads["bndiff2"], n=n, forward=forward)
    assert "a factor of `bndiff`" in text, text
    missing = grads["hpreact"] / values["bngain"]
    text = hints.value_hint("dhpreact", missing, grads["hpreact"], n=n, forward=forward)
    assert "a factor of `bngain` is missing" in text, text


# ---------------------------------------------------------------- value_hint: shapes and values
def test_value_hint_transposed(lec):
    _, grads, manual, _, n = lec
    text = hints.value_hint("dW2", manual["W2"].T, grads["W2"], n=n)
    assert "transposed" in text and "(27, 64)" in text


def test_value_hint_summed_over_the_wrong_dimension(lec):
    values, grads, manual, _, n = lec
    wrong = (values["counts"] * manual["probs"]).sum(0, keepdim=True)  # over the batch, not the classes
    assert tuple(wrong.shape) == (1, 27) and tuple(grads["counts_sum_inv"].shape) == (n, 1)
    text = hints.value_hint("dcounts_sum_inv", wrong, grads["counts_sum_inv"], n=n)
    assert "summed over the wrong dimension" in text


def test_value_hint_all_zeros(lec):
    _, grads, _, _, n = lec
    text = hints.value_hint("dW1", torch.zeros_like(grads["W1"]), grads["W1"], n=n)
    assert "all zeros" in text


@pytest.mark.parametrize("target", USED_TWICE)
def test_value_hint_one_branch_only(lec, target):
    _, grads, _, branches, n = lec
    parts = branches[target]
    assert len(parts) == 2 and set(parts) == set(spec.EXERCISE.consumers(target))
    for via, part in parts.items():
        other = next(o for o in parts if o != via)
        text = hints.value_hint("d" + target, part, grads[target], n=n, branches=parts)
        assert f"you have the part of the gradient through `{via}` but not the part through `{other}`" in text


def test_value_hint_aliasing(lec):
    _, grads, _, _, n = lec
    aliases = [["dbndiff", "dhprebn"]]
    text = hints.value_hint("dbndiff", grads["bndiff"] * 3, grads["bndiff"], n=n, aliases=aliases)
    assert "same tensor in memory" in text and "dhprebn" in text
    # other names are not blamed for it
    text = hints.value_hint("dh", grads["h"] * 3, grads["h"], n=n, aliases=aliases)
    assert "same tensor" not in text


def test_value_hint_overwritten_n(lec):
    _, grads, _, _, n = lec
    text = hints.value_hint("dlogits", grads["logits"] * 1.3, grads["logits"], n=n, n_seen=n - 1)
    assert n == 32 and "`n` is 31" in text
    assert "`n` is" not in hints.value_hint("dlogits", grads["logits"] * 1.3, grads["logits"], n=n, n_seen=n)


def test_value_hint_nan(lec):
    _, grads, _, _, n = lec
    bad = grads["h"].clone()
    bad[0, 0] = float("nan")
    assert "NaN" in hints.value_hint("dh", bad, grads["h"], n=n)


MISTAKES = [
    ("dprobs", "probs", 1),
    ("dhpreact", "hpreact", 2),
    ("dhprebn", "hprebn", 1),
    ("dlogits", "logits", 1),
]


@pytest.mark.parametrize("name,target,count", MISTAKES, ids=[m[0] for m in MISTAKES])
def test_value_hint_names_known_mistakes(lec, name, target, count):
    values, grads, _, branches, n = lec
    mistakes = known_mistakes(name, values, grads)
    assert len(mistakes) == count
    parts = branches[target] if len(branches[target]) > 1 else None  # as the judge passes them
    for label, wrong in mistakes.items():
        assert not torch.allclose(wrong, grads[target], rtol=1e-4, atol=1e-6), label  # a real mistake
        assert hints.value_hint(name, wrong, grads[target], n=n, branches=parts, mistakes=mistakes) == label


def test_known_mistake_labels_say_what_is_wrong(lec):
    values, grads, _, _, _ = lec
    assert "1/x" in next(iter(known_mistakes("dprobs", values, grads)))
    assert "Bessel" in next(iter(known_mistakes("dhprebn", values, grads)))
    assert "subtract 1" in next(iter(known_mistakes("dlogits", values, grads)))
    assert known_mistakes("dW1", values, grads) == {}


# ---------------------------------------------------------------- grading.decide (grader/verdicts/grading.py)
@pytest.fixture(scope="module")
def dcsi(lec):
    """dcounts_sum_inv: its one parent is dprobs."""
    _, grads, manual, _, _ = lec
    assert spec.EXERCISE.consumers("counts_sum_inv") == ["probs"]
    return spec.BY_GRADE_ID["ex1_dcounts_sum_inv"], grads["counts_sum_inv"], manual["counts_sum_inv"]


def _outcome(g, ref, value, own=None) -> Outcome:
    """What outcomes.collect gives decide: as submitted, and the own rule's value if it ran."""
    mine = compare_gradient(g, own, ref) if own is not None else None
    return Outcome(g, ref, value, compare_gradient(g, value, ref), own_rule=own, own=mine)


def test_decide_full_points_when_main_is_right(dcsi):
    g, ref, right = dcsi
    d = decide(_outcome(g, ref, right, own=right * 2))
    v = d.verdict
    assert v.score == v.max_score == g.points
    assert not v.carried and v.hint is None
    assert d.explain is NOTHING  # no hint owed


@pytest.mark.parametrize("credit", [1.0, 0.5, 0.0])
@pytest.mark.parametrize("points", [1.0, 2.0])
def test_decide_carried_error(dcsi, credit, points):
    g, ref, right = dcsi
    g = spec.Gradient(g.exercise, g.name, g.target, points)
    d = decide(_outcome(g, ref, right * 2, own=right), wrong_inputs=["dprobs"], carried_credit=credit)
    v = d.verdict
    assert v.carried
    assert v.score == pytest.approx(points * credit) and v.max_score == points
    assert "your rule is right; it received a wrong `dprobs`" in "\n".join(v.lines)
    assert d.explain is NOTHING


def test_decide_both_wrong(dcsi):
    g, ref, right = dcsi
    local = right * 3
    d = decide(_outcome(g, ref, right * 2, own=local), wrong_inputs=["dprobs"])
    assert d.verdict.score == 0.0 and not d.verdict.carried
    assert d.explain is local  # the hint describes the student's rule
    v = with_hint(d.verdict, "a hint")
    assert v.hint == "a hint" and v.lines[1] == "hint: a hint"


def test_decide_hints_from_main_when_the_local_run_has_nothing(dcsi):
    g, ref, right = dcsi
    main = right * 2
    d = decide(_outcome(g, ref, main, own=MISSING))
    assert d.verdict.score == 0.0 and d.explain is main
