"""An exercise trained with its instructor's own backward pass (the definition's exercise-1
solution), as exercise 4 trains Backprop Ninja's net with the student's: no autograd anywhere.
It tells the instructor that the hand-written gradients learn, and gives the reference numbers a
notebook quotes (benchmarks/gpt_block_reference.py). The setup cell named `batch` draws each
step's batch, as it does in the notebook."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import torch

from ..exercise.definition import Definition
from .check import run_notebook_code


@dataclass
class TrainRun:
    losses: list[float]  # each step's training loss
    ms_per_step: float
    values: dict  # the notebook's namespace with the trained parameters

    def mean_loss(self, last: int) -> float:
        tail = self.losses[-last:]
        return sum(tail) / len(tail)


def train(d: Definition, folder: Path, steps: int, lr: float, *, decay_at: float = 0.75) -> TrainRun:
    """SGD for `steps` steps, the rate divided by 10 after `decay_at` of them (the lecture's)."""
    batch = d.batch
    if batch is None or not d.solution:
        raise ValueError(f"{d.name}: training needs a setup cell named 'batch' and the exercise-1 solution")
    ns, _ = run_notebook_code(d, folder)  # the parameters as autograd's pass left them: detached
    draw, backward = compile(batch.code, "batch", "exec"), compile(d.solution, "solution", "exec")
    losses, start = [], time.perf_counter()
    with torch.no_grad():
        for i in range(steps):
            exec(draw, ns)
            ns.update(d.forward(ns))
            exec(backward, ns)
            rate = lr if i < decay_at * steps else lr / 10
            for p in d.params:
                ns[p] -= rate * ns["d" + p]
            losses.append(ns[d.loss].item())
    return TrainRun(losses, 1000 * (time.perf_counter() - start) / max(steps, 1), ns)
