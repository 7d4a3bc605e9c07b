"""grader/reference/inputs.py in-process: one submission's fresh inputs and references are
autograd's on the judge's own parameters and batch, deterministic per seed, and cover
exercise 4 and its training run. (The `fresh` fixture is conftest.py's, seed JUDGE_SEED.)"""

from __future__ import annotations

import math
import os

import torch

from grader.exercise import spec
from grader.exercise.definitions import backprop_ninja as lecture
from grader.exercise.definitions.backprop_ninja import network
from grader.reference.backprop_ninja import rules
from grader.reference.inputs import EVAL_EXAMPLES, context_free_loss, dataset, fresh_inputs
from grader.settings import JudgeSettings

from conftest import JUDGE_SEED


def test_fresh_reference_grads_are_autograds(fresh, names_txt):
    ds = dataset(names_txt)
    params, g = network.init_params(seed=JUDGE_SEED, vocab_size=ds.vocab_size)
    Xb, Yb = network.draw_batch(ds.Xtr, ds.Ytr, g)
    values, grads = rules.autograd_grads(params, Xb, Yb)
    assert set(fresh.grads) == set(grads)
    for k, t in grads.items():
        assert torch.equal(fresh.grads[k], t), k
    assert torch.equal(fresh.values["Xb"], Xb) and torch.equal(fresh.values["Yb"], Yb)
    assert set(fresh.branches) >= {"counts", "bndiff", "hprebn", "logits"}


def test_fresh_inputs_are_deterministic_per_seed(fresh, names_txt):
    again = fresh_inputs(dataset(names_txt), JudgeSettings(seed=JUDGE_SEED))
    other = fresh_inputs(dataset(names_txt), JudgeSettings(seed=JUDGE_SEED + 1))
    assert all(torch.equal(again.grads[k], fresh.grads[k]) for k in fresh.grads)
    assert not torch.equal(other.grads["W1"], fresh.grads["W1"])


def test_the_training_run_is_made_once_per_class(fresh, names_txt, monkeypatch):
    """Two students of one class: their own batch and exercise-4 inputs, the class's training
    run (start, reference loss), made once; another class's is made anew."""
    from grader.reference import inputs

    made = []
    real = inputs._training_run
    monkeypatch.setattr(inputs, "_training_run", lambda ds, s: made.append(s.training_seed) or real(ds, s))
    ds = dataset(names_txt)
    alice, bob = (fresh_inputs(ds, JudgeSettings(seed=JUDGE_SEED + i, class_seed=11)) for i in (0, 1))
    assert made == [11]
    assert not torch.equal(alice.values["Xb"], bob.values["Xb"])
    assert not torch.equal(alice.ex4_inputs["h"], bob.ex4_inputs["h"])
    assert all(torch.equal(alice.train[k], bob.train[k]) for k in spec.PARAMETERS)
    assert alice.reference_train_loss == bob.reference_train_loss < alice.initial_eval_loss
    alice.train["C"] = None  # a submission's dict is its own
    assert torch.is_tensor(bob.train["C"])
    other = fresh_inputs(ds, JudgeSettings(seed=JUDGE_SEED, class_seed=12))
    assert made == [11, 12] and not torch.equal(other.train["W1"], bob.train["W1"])
    start, _ = network.init_params(seed=11 + 2, vocab_size=ds.vocab_size, n_hidden=lecture.N_HIDDEN_TRAIN)
    assert all(torch.equal(bob.train[k], start[k]) for k in spec.PARAMETERS)


def test_fresh_ex4_reference(fresh, names_txt):
    V, E, B, H = dataset(names_txt).vocab_size, lecture.N_EMBD, lecture.BLOCK_SIZE, lecture.N_HIDDEN_TRAIN
    assert H == 200
    shapes = {
        "C": (V, E),
        "W1": (E * B, H),
        "b1": (H,),
        "W2": (H, V),
        "b2": (V,),
        "bngain": (1, H),
        "bnbias": (1, H),
    }
    assert list(fresh.ex4_reference) == spec.PARAMETERS
    assert {k: tuple(t.shape) for k, t in fresh.ex4_reference.items()} == shapes
    assert all(
        bool(torch.isfinite(t).all()) and float(t.abs().max()) > 0 for t in fresh.ex4_reference.values()
    )
    assert set(fresh.ex4_inputs) == set(spec.EX4_ARGUMENTS)
    assert tuple(fresh.ex4_inputs["h"].shape) == (lecture.BATCH_SIZE, H)


def test_fresh_initial_eval_loss(fresh):
    assert math.isfinite(fresh.initial_eval_loss)
    assert fresh.initial_eval_loss > 3
    assert fresh.eval_X.shape[0] == fresh.eval_Y.shape[0] == EVAL_EXAMPLES


def test_context_free_loss_is_the_labels_entropy():
    labels = torch.tensor([0, 0, 1, 1])
    assert math.isclose(context_free_loss(labels), math.log(2), rel_tol=1e-9)
    assert context_free_loss(torch.tensor([3, 3, 3])) == 0.0


def test_dataset_is_read_once_per_file_version(names_txt, tmp_path):
    assert dataset(names_txt) is dataset(names_txt)
    copy = tmp_path / "names.txt"
    copy.write_text("emma\nolivia\n")
    small = dataset(copy)
    assert small.vocab_size == len(set("emmaolivia")) + 1
    copy.write_text("ava\n")
    os.utime(copy, ns=(copy.stat().st_atime_ns, copy.stat().st_mtime_ns + 10**9))  # coarse clocks
    assert dataset(copy) is not small  # a changed file is read again
