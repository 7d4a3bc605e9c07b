"""Fresh inputs of an exercise written from its definition (grader/authoring/): the notebook's
own setup cells, re-seeded for the student as the replay re-seeds them (replay/plan.reseed), run
here in the judge's process (the instructor's code, from the source notebook's metadata), then
the definition's forward pass, autograd's gradients of every tensor, each branch's share, and
autograd's backward as the unit the numeric bound counts in. Trusted side only."""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path

import torch

from ..exercise.definition import IMPORTS
from ..exercise.graded import GradedExercise
from ..replay.plan import reseed
from ..settings import JudgeSettings
from .inputs import FreshInputs
from .steps import autograd_branches


def setup_values(exercise: GradedExercise, folder: Path, settings: JudgeSettings) -> dict:
    """The setup cells' names, re-seeded, run in `folder` (where the notebook's files are)."""
    d, ns = exercise.definition, {}
    exec(IMPORTS, ns)
    here = Path.cwd()
    os.chdir(folder)
    try:
        with contextlib.redirect_stdout(io.StringIO()), torch.random.fork_rng():
            for c in d.setup:
                size = settings.batch_size if c.grade_id == exercise.batch_cell else None
                exec(reseed(c.code, settings.seed, size, seed_constant=d.seed), ns)
    finally:
        os.chdir(here)
    return ns


def fresh_written(exercise: GradedExercise, folder: Path, settings: JudgeSettings) -> FreshInputs:
    d = exercise.definition
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the replay computes
    try:
        ns = setup_values(exercise, folder, settings)
        start = {k: ns[k] for k in (*d.params, *d.data, *d.constants)}
        values, grads = _autograd(d, start)
    finally:
        torch.set_num_threads(threads)

    def backward():  # autograd's backward of the whole forward pass, what a hand one compares with
        _autograd(d, start)

    return FreshInputs(values, grads, autograd_branches(values, grads, d), backward)


def _autograd(d, start: dict) -> tuple[dict, dict]:
    v = {k: (t.detach().clone().requires_grad_(True) if k in d.params else t) for k, t in start.items()}
    with torch.enable_grad():
        v = d.forward(v, on_step=lambda name, t: t.retain_grad() if name != d.loss else None)
        v[d.loss].backward()
    grads = {k: v[k].grad.detach().clone() for k in [*(s.name for s in d.steps[:-1]), *d.params]}
    values = {k: (t.detach() if isinstance(t, torch.Tensor) else t) for k, t in v.items()}
    return values, grads
