"""Fresh inputs and their references: what one submission's replay is judged on.

Per student, fresh parameters and a fresh batch (from JudgeSettings.seed), the reference
gradients by autograd and, for the hints, each branch's share of them (autograd too); exercise 4's
inputs and references. Per class (JudgeSettings.training_seed), exercise 4's training run: its
start, and the loss autograd's backward reaches from it, which the student's must come close to.
Trusted side only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..exercise import spec
from ..exercise.definitions import backprop_ninja as lecture
from ..exercise.definitions.backprop_ninja import network
from ..settings import JudgeSettings
from . import steps
from .backprop_ninja import rules

EVAL_EXAMPLES = 4000
TRAINING_TOLERANCE = 0.2  # how far above the kit's loss a student's training run may end


@dataclass
class FreshInputs:
    values: dict[str, torch.Tensor]  # exercises 1-3: every forward value on the fresh batch
    grads: dict[str, torch.Tensor]  # ... and the gradient of the loss w.r.t. each (autograd)
    branches: dict[str, dict[str, torch.Tensor]]  # a tensor read twice -> reader -> its share
    backward: Callable[[], object]  # the reference backward, what the numeric bound counts in
    # Backprop Ninja's exercise 4 (an exercise without training has none of these)
    ex4_inputs: dict[str, torch.Tensor] = field(default_factory=dict)  # manual_backward's arguments
    ex4_reference: dict[str, torch.Tensor] = field(default_factory=dict)  # parameter -> autograd's
    train: dict[str, torch.Tensor] = field(default_factory=dict)  # the training run's start, Xtr, Ytr
    eval_X: torch.Tensor | None = None
    eval_Y: torch.Tensor | None = None
    initial_eval_loss: float = float("nan")
    reference_train_loss: float = float("nan")  # the same training run with the kit's backward
    context_free_loss: float = float("nan")  # the best any net that ignores its input can reach
    evaluate: Callable[[dict], float] | None = None  # trained parameters -> their held-out loss
    train_tolerance: float = TRAINING_TOLERANCE  # how far above the reference's loss the student's may end
    numbers: dict = field(default_factory=dict)  # a written exercise's sizes, handed as numbers
    losses: list = field(default_factory=list, init=False, repr=False, compare=False)  # held_out_loss's

    def held_out_loss(self, params: dict) -> float:
        """`evaluate`, once a set of tensors: the judge asks it of one run up to three times (the
        training verdict; whether to watch the run; the blocked run's, which is that run)."""
        key = tuple(params.values())
        for seen, loss in self.losses:
            if len(seen) == len(key) and all(a is b for a, b in zip(seen, key)):
                return loss
        loss = self.evaluate(params)
        self.losses.append((key, loss))  # holding the tensors: no other tensor can be one of them
        return loss


_datasets: dict[tuple, network.Dataset] = {}


def dataset(names_txt: Path) -> network.Dataset:
    key = (str(names_txt), names_txt.stat().st_mtime_ns)
    if key not in _datasets:
        _datasets.clear()
        _datasets[key] = network.load_dataset(names_txt.read_text().splitlines())
    return _datasets[key]


def fresh_inputs(ds: network.Dataset, settings: JudgeSettings) -> FreshInputs:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the replay computes single-threaded: same bits where it can
    try:
        return _fresh_inputs(ds, settings)
    finally:
        torch.set_num_threads(threads)


def _fresh_inputs(ds: network.Dataset, settings: JudgeSettings) -> FreshInputs:
    seed = settings.seed
    params, g = network.init_params(seed=seed, vocab_size=ds.vocab_size)
    Xb, Yb = network.draw_batch(ds.Xtr, ds.Ytr, g, settings.batch_size)
    values, grads = rules.autograd_grads(params, Xb, Yb)
    branches = steps.autograd_branches(values, grads, spec.EXERCISE)
    p4, g4 = network.init_params(seed=seed + 1, vocab_size=ds.vocab_size, n_hidden=lecture.N_HIDDEN_TRAIN)
    X4, Y4 = network.draw_batch(ds.Xtr, ds.Ytr, g4, settings.batch_size)
    v4 = network.cross_entropy_forward(p4, X4, Y4, track=True)
    v4["loss"].backward()
    ex4_reference = {k: v4[k].grad.detach().clone() for k in spec.PARAMETERS}
    ex4_inputs = {k: v4[k].detach().clone() for k in spec.EX4_ARGUMENTS}
    run = training_run(ds, settings)
    eval_X, eval_Y = run.eval_X, run.eval_Y
    return FreshInputs(
        values,
        grads,
        branches,
        lambda: rules.manual_grads(values),
        ex4_inputs,
        ex4_reference,
        dict(run.train),  # the dict is this submission's; its tensors, read only, the class's
        eval_X,
        eval_Y,
        run.initial_eval_loss,
        run.reference_train_loss,
        run.context_free_loss,
        lambda params: float(network.cross_entropy_forward(params, eval_X, eval_Y)["loss"]),
    )


@dataclass(frozen=True)
class TrainingRun:
    """Exercise 4's training run as the judge knows it: its start and data, the held-out set, and
    the losses before and after the reference run. The same for every submission of a class
    (JudgeSettings.training_seed): its tensors are shared, read only."""

    train: dict[str, torch.Tensor]  # the start (spec.PARAMETERS), Xtr, Ytr
    eval_X: torch.Tensor
    eval_Y: torch.Tensor
    initial_eval_loss: float
    reference_train_loss: float
    context_free_loss: float


_runs: dict[tuple, tuple[network.Dataset, TrainingRun]] = {}


def training_run(ds: network.Dataset, settings: JudgeSettings) -> TrainingRun:
    """Made once per class and dataset: a batch's process grades every submission from one."""
    key = (id(ds), settings.train_start_seed, settings.train_seed, settings.train_steps)
    if key not in _runs or _runs[key][0] is not ds:  # (an id is reused only once ds is gone)
        _runs.clear()
        _runs[key] = (ds, _training_run(ds, settings))
    return _runs[key][1]


def _training_run(ds: network.Dataset, settings: JudgeSettings) -> TrainingRun:
    start, _ = network.init_params(
        seed=settings.train_start_seed, vocab_size=ds.vocab_size, n_hidden=lecture.N_HIDDEN_TRAIN
    )
    eval_X, eval_Y = ds.Xdev[:EVAL_EXAMPLES], ds.Ydev[:EVAL_EXAMPLES]
    initial = float(network.cross_entropy_forward(start, eval_X, eval_Y)["loss"])
    train = dict(start, Xtr=ds.Xtr, Ytr=ds.Ytr)
    trained = reference_training(train, settings)
    reached = float(network.cross_entropy_forward(trained, eval_X, eval_Y)["loss"])
    return TrainingRun(train, eval_X, eval_Y, initial, reached, context_free_loss(eval_Y))


def context_free_loss(labels: torch.Tensor) -> float:
    """Cross-entropy of one fixed distribution q is H(p) + KL(p||q) >= H(p), p the labels'
    frequencies: no net that ignores its input does better."""
    freq = torch.bincount(labels).double() / len(labels)
    return float(-(freq[freq > 0] * freq[freq > 0].log()).sum())


def reference_training(train: dict, settings: JudgeSettings) -> dict:
    """Runner._train (grader/untrusted/runner.py) with autograd's backward: the same start, the
    same batches (JudgeSettings.train_seed, network.draw_batch's batch size), steps and rate."""
    params = {k: train[k].clone() for k in spec.PARAMETERS}
    g = torch.Generator().manual_seed(settings.train_seed)
    for _ in range(settings.train_steps):
        Xb, Yb = network.draw_batch(train["Xtr"], train["Ytr"], g)
        with torch.enable_grad():
            v = network.cross_entropy_forward(params, Xb, Yb, track=True)
            v["loss"].backward()
        params = {k: params[k] - lecture.LEARNING_RATE * v[k].grad for k in spec.PARAMETERS}
    return params
