"""The replay's training run, one batch at a time: for each step, the forward pass the
student's manual_backward is handed (grader/untrusted/runner.py calls it and applies its
gradients). Backprop Ninja's exercise 4 draws its batches from the training set with its own
forward pass; a written exercise runs its definition's on the judge's batches."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import torch

from ..exercise.definition import Definition
from ..exercise.definitions.backprop_ninja import network
from .protocol import TrainingPlan, batch_key

Forward = Callable[[dict], dict]  # parameters -> every value of the forward pass


def training_batches(plan: TrainingPlan, train: dict, seed: int, steps: int) -> Iterator[Forward]:
    return _written(plan, train, steps) if plan.get("forward") else _lecture(train, seed, steps)


def _lecture(train: dict, seed: int, steps: int) -> Iterator[Forward]:
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        Xb, Yb = network.draw_batch(train["Xtr"], train["Ytr"], g)
        yield lambda params, Xb=Xb, Yb=Yb: network.cross_entropy_forward(params, Xb, Yb)


def _written(plan: TrainingPlan, train: dict, steps: int) -> Iterator[Forward]:
    d = Definition.from_json(plan["forward"])
    fixed = {**{k: t for k, t in train.items() if k in d.constants}, **plan.get("numbers", {})}
    for i in range(steps):
        batch = {k: train[batch_key(i, k)] for k in d.data}
        yield lambda params, batch=batch: d.forward({**params, **batch, **fixed})
