"""Backprop Ninja's network.py: the lecture's network as students see it (data split,
initialisation, batches, exercise 4's forward pass), and the numbers the notebook promises
students (the first loss, the split sizes), pinned. The chunked forward pass of
grader/reference/backprop_ninja/rules.py is the reference it must agree with."""

from __future__ import annotations

import ast
import random

import pytest
import torch

from grader.exercise.definitions import backprop_ninja as lecture
from grader.exercise.definitions.backprop_ninja import network
from grader.reference.backprop_ninja import rules

from conftest import synthetic_batch

OTHER_SEEDS = [0, 42, 1337]


def test_the_lectures_constants():
    """The lecture's constants, defined once in its definition's package."""
    assert (lecture.LECTURE_SEED, lecture.BATCH_SIZE, lecture.N_HIDDEN, lecture.N_HIDDEN_TRAIN) == (
        2147483647,
        32,
        64,
        200,
    )


# ---------------------------------------------------------------- the lecture's numbers
def test_initial_loss_is_pinned(lecture_batch):
    v = rules.forward(*lecture_batch)
    assert v["loss"].item() == pytest.approx(3.3112, abs=1e-4)


def test_lecture_batch_is_the_notebooks(lecture_dataset, lecture_batch):
    """The notebook draws the batch from the same generator right after the parameters."""
    g = torch.Generator().manual_seed(lecture.LECTURE_SEED)
    for shape in [(27, 10), (30, 64), (64,), (64, 27), (27,)]:
        torch.randn(shape, generator=g)
    ix = torch.randint(0, lecture_dataset.Xtr.shape[0], (32,), generator=g)
    _, Xb, Yb = lecture_batch
    assert torch.equal(Xb, lecture_dataset.Xtr[ix]) and torch.equal(Yb, lecture_dataset.Ytr[ix])


def test_init_params_leaves_torch_global_rng_alone():
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(123)
        before = torch.get_rng_state()
        network.init_params()
        network.init_params(seed=7, n_hidden=lecture.N_HIDDEN_TRAIN)
        assert torch.equal(torch.get_rng_state(), before)


@pytest.mark.parametrize("n_hidden", [lecture.N_HIDDEN, lecture.N_HIDDEN_TRAIN])
def test_batchnorm_params_match_the_notebooks_global_seed(n_hidden):
    params, _ = network.init_params(n_hidden=n_hidden)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(2147483647)
        bngain = torch.randn((1, n_hidden)) * 0.1 + 1.0
        bnbias = torch.randn((1, n_hidden)) * 0.1
    assert torch.equal(params["bngain"], bngain)
    assert torch.equal(params["bnbias"], bnbias)


def test_init_params_shapes_and_first_draws():
    params, g = network.init_params()
    assert {k: tuple(t.shape) for k, t in params.items()} == {
        "C": (27, 10),
        "W1": (30, 64),
        "b1": (64,),
        "W2": (64, 27),
        "b2": (27,),
        "bngain": (1, 64),
        "bnbias": (1, 64),
    }
    # the lecture's generator, drawn in the lecture's order
    g2 = torch.Generator().manual_seed(lecture.LECTURE_SEED)
    assert torch.equal(params["C"], torch.randn((27, 10), generator=g2))
    assert torch.equal(params["W1"], torch.randn((30, 64), generator=g2) * (5 / 3) / 30**0.5)
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
    network.load_dataset(words)
    assert random.getstate() == before
    assert words == lecture_words


def test_dataset_is_the_lectures(lecture_dataset, lecture_words):
    ds = lecture_dataset
    assert ds.vocab_size == 27
    assert ds.stoi["."] == 0 and ds.stoi["a"] == 1 and ds.itos[26] == "z"
    assert tuple(ds.Xtr.shape) == (182625, 3) and tuple(ds.Ytr.shape) == (182625,)
    assert tuple(ds.Xdev.shape) == (22655, 3) and tuple(ds.Ydev.shape) == (22655,)
    assert tuple(ds.Xte.shape) == (22866, 3) and tuple(ds.Yte.shape) == (22866,)
    # one example per character plus the end token
    assert len(ds.Xtr) + len(ds.Xdev) + len(ds.Xte) == sum(len(w) + 1 for w in lecture_words)


def test_dataset_split_is_the_notebooks_shuffle(lecture_dataset, lecture_words):
    """The notebook seeds Python's global RNG with 42 and shuffles in place."""
    words = list(lecture_words)
    state = random.getstate()
    try:
        random.seed(42)
        random.shuffle(words)
    finally:
        random.setstate(state)
    n1 = int(0.8 * len(words))
    Xtr, Ytr = network.build_dataset(words[:n1], lecture_dataset.stoi)
    assert torch.equal(Xtr, lecture_dataset.Xtr) and torch.equal(Ytr, lecture_dataset.Ytr)


def _lectures_loop(words, stoi, block_size):
    """The notebook's build_dataset, as the lecture writes it: the function its data-split cell
    defines (network.DATA_SPLIT_CELL), reading the cell's globals from here, printing nothing."""
    defs = [node for node in ast.parse(network.DATA_SPLIT_CELL).body if isinstance(node, ast.FunctionDef)]
    ns = {"stoi": stoi, "block_size": block_size, "torch": torch, "print": lambda *a: None}
    exec(compile(ast.Module(defs, []), "<data_split>", "exec"), ns)
    return ns["build_dataset"](words)


@pytest.mark.parametrize("block_size", [1, 3, 5])
def test_build_dataset_is_the_lectures_loop(lecture_words, lecture_dataset, block_size):
    """The same tensors, bit for bit and dtype, on the whole of names.txt and on short words."""
    for words in (lecture_words, ["a"], ["ab", "c", "abcabcab"]):
        ours = network.build_dataset(words, lecture_dataset.stoi, block_size)
        theirs = _lectures_loop(words, lecture_dataset.stoi, block_size)
        for a, b in zip(ours, theirs):
            assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    X, Y = network.build_dataset([], lecture_dataset.stoi, block_size)  # no words, no examples
    assert X.shape == (0, block_size) and Y.shape == (0,)


def test_build_dataset_contexts():
    stoi = {".": 0, "a": 1, "b": 2}
    X, Y = network.build_dataset(["ab"], stoi)
    assert X.tolist() == [[0, 0, 0], [0, 0, 1], [0, 1, 2]]
    assert Y.tolist() == [1, 2, 0]


# ---------------------------------------------------------------- exercise 4's forward
def test_cross_entropy_forward_gives_the_same_loss(lecture_batch):
    chunked = rules.forward(*lecture_batch)["loss"]
    short = network.cross_entropy_forward(*lecture_batch)["loss"]
    assert short.item() == pytest.approx(chunked.item(), abs=1e-6)


@pytest.mark.parametrize("seed", OTHER_SEEDS)
def test_cross_entropy_forward_agrees_on_other_batches(seed):
    params, _ = network.init_params(seed=seed, n_hidden=lecture.N_HIDDEN_TRAIN)
    batch = synthetic_batch(seed, 32)
    chunked = rules.forward(params, *batch)
    short = network.cross_entropy_forward(params, *batch)
    assert short["loss"].item() == pytest.approx(chunked["loss"].item(), abs=1e-6)
    for name in ("hprebn", "bnvar_inv", "bnraw", "h", "logits"):
        torch.testing.assert_close(short[name], chunked[name], rtol=1e-5, atol=1e-6)
