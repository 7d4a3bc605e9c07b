"""grader.lecture: the network, its step-by-step backward rules and the lecture's numbers.

Every backward rule is checked against torch autograd (as micrograd's tests do), and the
numbers the notebook promises students (the first loss, the split sizes) are pinned.
"""
from __future__ import annotations

import dataclasses
import hashlib
import random

import pytest
import torch

from grader import lecture, spec
from grader.data import NAMES_SHA256

# Exercise 1's order, as the grader (and the notebook) walks it.
EX1_ORDER = [g.target for g in spec.GRADIENTS if g.exercise == 1]
STEP_OUTPUTS = [s.out for s in lecture.STEPS if s.out != "loss"]
# Tensors the forward pass reads twice: their gradient is the sum of two branches.
USED_TWICE = ["counts", "bndiff", "hprebn", "logits"]
OTHER_SEEDS = [0, 42, 1337]



# ---------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def lecture_words(names_txt) -> list[str]:
    """The lecture's names.txt (the offline substitute would not reproduce its numbers)."""
    digest = hashlib.sha256(names_txt.read_bytes()).hexdigest()
    if digest != NAMES_SHA256:
        pytest.skip(f"{names_txt} is not the lecture's names.txt (sha256 {digest[:12]}...): "
                    "the lecture's numbers only hold for the original file")
    return names_txt.read_text().splitlines()


@pytest.fixture(scope="module")
def dataset(lecture_words) -> lecture.Dataset:
    return lecture.load_dataset(lecture_words)


@pytest.fixture(scope="module")
def lecture_batch(dataset):
    """What the notebook builds: the lecture's parameters and its first batch of 32."""
    params, g = lecture.init_params()
    Xb, Yb = lecture.draw_batch(dataset.Xtr, dataset.Ytr, g)
    return params, Xb, Yb


def synthetic_batch(seed: int, batch_size: int, vocab_size: int = 27):
    g = torch.Generator().manual_seed(seed + 1)
    Xb = torch.randint(0, vocab_size, (batch_size, lecture.BLOCK_SIZE), generator=g)
    Yb = torch.randint(0, vocab_size, (batch_size,), generator=g)
    return Xb, Yb


def both_grads(params, Xb, Yb):
    values, auto = lecture.autograd_grads(params, Xb, Yb)
    manual, branches = lecture.manual_grads(values)
    return values, auto, manual, branches


def assert_grads_close(manual: dict, auto: dict, atol: float):
    assert set(manual) == set(auto) == set(STEP_OUTPUTS) | set(lecture.PARAMETERS)
    for name in auto:
        torch.testing.assert_close(manual[name], auto[name], rtol=0.0, atol=atol,
                                   msg=lambda m, name=name: f"d{name}: {m}")


# ---------------------------------------------------------------- backward rules vs autograd
def test_manual_grads_match_autograd_for_the_lecture_batch(lecture_batch):
    _, auto, manual, _ = both_grads(*lecture_batch)
    assert_grads_close(manual, auto, atol=1e-7)


@pytest.mark.parametrize("n_hidden, batch_size", [(lecture.N_HIDDEN, 32), (lecture.N_HIDDEN_TRAIN, 32),
                                                  (lecture.N_HIDDEN, 7), (lecture.N_HIDDEN_TRAIN, 7)])
@pytest.mark.parametrize("seed", [lecture.LECTURE_SEED, *OTHER_SEEDS])
def test_manual_grads_match_autograd(seed, n_hidden, batch_size):
    params, _ = lecture.init_params(seed=seed, n_hidden=n_hidden)
    _, auto, manual, _ = both_grads(params, *synthetic_batch(seed, batch_size))
    assert auto["W1"].shape == (lecture.N_EMBD * lecture.BLOCK_SIZE, n_hidden)
    assert auto["logprobs"].shape == (batch_size, 27)
    assert_grads_close(manual, auto, atol=1e-7)


@pytest.mark.parametrize("seed", [lecture.LECTURE_SEED, *OTHER_SEEDS])
def test_manual_grads_match_autograd_in_float64(seed):
    """In double precision rounding is ~1e-16, so even a rule wrong by 1e-6 relative shows."""
    params, _ = lecture.init_params(seed=seed)
    params = {k: t.double() for k, t in params.items()}
    _, auto, manual, _ = both_grads(params, *synthetic_batch(seed, 32))
    assert all(t.dtype == torch.float64 for t in manual.values())
    assert_grads_close(manual, auto, atol=1e-12)


def test_a_wrong_rule_is_caught(monkeypatch):
    """The comparison above has teeth: Bessel's n instead of n-1 in bnvar's rule fails it."""
    bessel_less = dataclasses.replace(
        lecture.STEP_OF["bnvar"],
        backward=lambda v, d: {"bndiff2": torch.ones_like(v["bndiff2"]) * d / lecture._n(v)})
    monkeypatch.setattr(lecture, "STEPS", [bessel_less if s.out == "bnvar" else s for s in lecture.STEPS])
    params, _ = lecture.init_params()
    _, auto, manual, _ = both_grads(params, *synthetic_batch(0, 32))
    # Closer to the loss nothing changes; from bndiff2 down everything is off by ~3%.
    for name in ("logprobs", "hpreact", "bnvar"):
        torch.testing.assert_close(manual[name], auto[name], rtol=0.0, atol=1e-7)
    for name in ("bndiff2", "bndiff", "hprebn", "W1", "C"):
        assert not torch.allclose(manual[name], auto[name], rtol=0, atol=1e-7), name


def test_bit_exact_from_logprobs_through_b2(lecture_batch):
    """As in the lecture: the first eleven gradients come out bit-for-bit like autograd's."""
    _, auto, manual, _ = both_grads(*lecture_batch)
    through_b2 = EX1_ORDER[:EX1_ORDER.index("b2") + 1]
    assert through_b2[0] == "logprobs" and len(through_b2) == 11
    for name in through_b2:
        assert torch.equal(manual[name], auto[name]), f"d{name} is not bit-exact"


# ---------------------------------------------------------------- branches
@pytest.mark.parametrize("name", USED_TWICE)
def test_two_branches_sum_to_the_gradient(name):
    params, _ = lecture.init_params()
    _, auto, manual, branches = both_grads(params, *synthetic_batch(lecture.LECTURE_SEED, 32))
    assert len(branches[name]) == 2
    assert set(branches[name]) == set(lecture.consumers(name))
    first, second = branches[name].values()
    assert torch.equal(first + second, manual[name])
    torch.testing.assert_close(first + second, auto[name], rtol=0.0, atol=1e-7)
    # forgetting either branch is a wrong answer, except the max trick's branch, which is
    # mathematically zero (the grader accepts dlogits without it)
    for consumer, branch in branches[name].items():
        alone_passes = torch.allclose(branch, auto[name], rtol=1e-4, atol=1e-6)
        assert alone_passes == ((name, consumer) == ("logits", "norm_logits")), consumer


def test_every_other_tensor_has_one_branch():
    params, _ = lecture.init_params()
    _, _, manual, branches = both_grads(params, *synthetic_batch(0, 32))
    assert set(branches) == set(manual)
    for name, contributions in branches.items():
        assert len(contributions) == (2 if name in USED_TWICE else 1), (name, list(contributions))
        assert set(contributions) == set(lecture.consumers(name)), name


# ---------------------------------------------------------------- graph structure
@pytest.mark.parametrize("name, expected", [
    ("hprebn", ["bnmeani", "bndiff"]),
    ("counts", ["counts_sum", "probs"]),
    ("logits", ["logit_maxes", "norm_logits"]),
    ("bndiff", ["bndiff2", "bnraw"]),
    ("logprobs", ["loss"]),
    ("W1", ["hprebn"]),
    ("bngain", ["hpreact"]),
    ("loss", []),
])
def test_consumers(name, expected):
    assert lecture.consumers(name) == expected


@pytest.mark.parametrize("name, expected", [
    ("counts", {"logprobs", "probs", "counts_sum_inv", "counts_sum"}),
    ("logprobs", set()),
    ("loss", set()),
    ("probs", {"logprobs"}),
    ("W2", {"logits", "logit_maxes", "norm_logits", "counts", "counts_sum", "counts_sum_inv",
            "probs", "logprobs"}),
    ("C", set(STEP_OUTPUTS)),
])
def test_upstream(name, expected):
    assert lecture.upstream(name) == expected


def test_exercise_1_covers_every_tensor_once():
    assert len(EX1_ORDER) == len(set(EX1_ORDER))
    assert set(EX1_ORDER) == set(STEP_OUTPUTS) | set(lecture.PARAMETERS)


@pytest.mark.parametrize("gradient", [g for g in spec.GRADIENTS if g.exercise == 1],
                         ids=lambda g: g.grade_id)
def test_exercise_1_order_is_a_backward_order(gradient):
    """Each gradient only needs gradients graded before it: the grader relies on this."""
    position = EX1_ORDER.index(gradient.target)
    for up in lecture.upstream(gradient.target):
        assert EX1_ORDER.index(up) < position, f"d{up} is needed by {gradient.name} but comes later"


# ---------------------------------------------------------------- the lecture's numbers
def test_initial_loss_is_pinned(lecture_batch):
    v = lecture.forward(*lecture_batch)
    assert v["loss"].item() == pytest.approx(3.3112, abs=1e-4)


def test_lecture_batch_is_the_notebooks(dataset, lecture_batch):
    """The notebook draws the batch from the same generator right after the parameters."""
    g = torch.Generator().manual_seed(lecture.LECTURE_SEED)
    for shape in [(27, 10), (30, 64), (64,), (64, 27), (27,)]:
        torch.randn(shape, generator=g)
    ix = torch.randint(0, dataset.Xtr.shape[0], (32,), generator=g)
    _, Xb, Yb = lecture_batch
    assert torch.equal(Xb, dataset.Xtr[ix]) and torch.equal(Yb, dataset.Ytr[ix])


def test_init_params_leaves_torch_global_rng_alone():
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(123)
        before = torch.get_rng_state()
        lecture.init_params()
        lecture.init_params(seed=7, n_hidden=lecture.N_HIDDEN_TRAIN)
        assert torch.equal(torch.get_rng_state(), before)


@pytest.mark.parametrize("n_hidden", [lecture.N_HIDDEN, lecture.N_HIDDEN_TRAIN])
def test_batchnorm_params_match_the_notebooks_global_seed(n_hidden):
    params, _ = lecture.init_params(n_hidden=n_hidden)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(2147483647)
        bngain = torch.randn((1, n_hidden)) * 0.1 + 1.0
        bnbias = torch.randn((1, n_hidden)) * 0.1
    assert torch.equal(params["bngain"], bngain)
    assert torch.equal(params["bnbias"], bnbias)


def test_init_params_shapes_and_first_draws():
    params, g = lecture.init_params()
    assert {k: tuple(t.shape) for k, t in params.items()} == {
        "C": (27, 10), "W1": (30, 64), "b1": (64,), "W2": (64, 27), "b2": (27,),
        "bngain": (1, 64), "bnbias": (1, 64)}
    # the lecture's generator, drawn in the lecture's order
    g2 = torch.Generator().manual_seed(lecture.LECTURE_SEED)
    assert torch.equal(params["C"], torch.randn((27, 10), generator=g2))
    assert torch.equal(params["W1"], torch.randn((30, 64), generator=g2) * (5 / 3) / 30 ** 0.5)
    assert not any(t.requires_grad for t in params.values())
    # the generator comes back positioned after the parameters (the batch is drawn next)
    assert torch.equal(g.get_state(), _after_params(g2).get_state())


def _after_params(g):
    for shape in [(64,), (64, 27), (27,)]:
        torch.randn(shape, generator=g)
    return g


# ---------------------------------------------------------------- data
def test_load_dataset_leaves_python_random_and_the_callers_list_alone(lecture_words):
    words = list(lecture_words)
    random.seed(2024)
    before = random.getstate()
    lecture.load_dataset(words)
    assert random.getstate() == before
    assert words == lecture_words


def test_dataset_is_the_lectures(dataset, lecture_words):
    assert dataset.vocab_size == 27
    assert dataset.stoi["."] == 0 and dataset.stoi["a"] == 1 and dataset.itos[26] == "z"
    assert tuple(dataset.Xtr.shape) == (182625, 3) and tuple(dataset.Ytr.shape) == (182625,)
    assert tuple(dataset.Xdev.shape) == (22655, 3) and tuple(dataset.Ydev.shape) == (22655,)
    assert tuple(dataset.Xte.shape) == (22866, 3) and tuple(dataset.Yte.shape) == (22866,)
    # one example per character plus the end token
    assert len(dataset.Xtr) + len(dataset.Xdev) + len(dataset.Xte) == sum(len(w) + 1 for w in lecture_words)


def test_dataset_split_is_the_notebooks_shuffle(dataset, lecture_words):
    """The notebook seeds Python's global RNG with 42 and shuffles in place."""
    words = list(lecture_words)
    state = random.getstate()
    try:
        random.seed(42)
        random.shuffle(words)
    finally:
        random.setstate(state)
    n1 = int(0.8 * len(words))
    Xtr, Ytr = lecture.build_dataset(words[:n1], dataset.stoi)
    assert torch.equal(Xtr, dataset.Xtr) and torch.equal(Ytr, dataset.Ytr)


def test_build_dataset_contexts():
    stoi = {".": 0, "a": 1, "b": 2}
    X, Y = lecture.build_dataset(["ab"], stoi)
    assert X.tolist() == [[0, 0, 0], [0, 0, 1], [0, 1, 2]]
    assert Y.tolist() == [1, 2, 0]


# ---------------------------------------------------------------- exercise 4's forward
def test_cross_entropy_forward_gives_the_same_loss(lecture_batch):
    chunked = lecture.forward(*lecture_batch)["loss"]
    short = lecture.cross_entropy_forward(*lecture_batch)["loss"]
    assert short.item() == pytest.approx(chunked.item(), abs=1e-6)


@pytest.mark.parametrize("seed", OTHER_SEEDS)
def test_cross_entropy_forward_agrees_on_other_batches(seed):
    params, _ = lecture.init_params(seed=seed, n_hidden=lecture.N_HIDDEN_TRAIN)
    batch = synthetic_batch(seed, 32)
    chunked = lecture.forward(params, *batch)
    short = lecture.cross_entropy_forward(params, *batch)
    assert short["loss"].item() == pytest.approx(chunked["loss"].item(), abs=1e-6)
    for name in ("hprebn", "bnvar_inv", "bnraw", "h", "logits"):
        torch.testing.assert_close(short[name], chunked[name], rtol=1e-5, atol=1e-6)
