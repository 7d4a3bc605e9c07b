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

from ..exercise.definition import IMPORTS, Definition
from ..exercise.graded import GradedExercise
from ..replay.plan import reseed
from ..settings import JudgeSettings
from .inputs import FreshInputs
from .steps import autograd_branches, definition_autograd
from .training import add_training


def setup_namespace(d: Definition, folder: Path, rewrite=lambda cell: cell.code) -> dict:
    """The notebook's imports and setup cells (each as `rewrite` gives it) run in one namespace,
    in `folder` (where the setup finds its files); what they print and torch's global generator
    are left as they were."""
    ns: dict = {}
    exec(IMPORTS, ns)
    here = Path.cwd()
    os.chdir(folder)
    try:
        with contextlib.redirect_stdout(io.StringIO()), torch.random.fork_rng():
            for c in d.setup:
                exec(compile(rewrite(c), f"<{d.name}: {c.grade_id}>", "exec"), ns)
    finally:
        os.chdir(here)
    return ns


def setup_values(exercise: GradedExercise, folder: Path, settings: JudgeSettings) -> dict:
    """The setup cells' names, re-seeded as the replay re-seeds them, run in `folder`."""
    return setup_namespace(exercise.definition, folder, reseeded(exercise, settings))


def reseeded(exercise: GradedExercise, settings: JudgeSettings):
    """A setup cell's code as the replay runs it: the student's seed, the replay's batch size."""

    def code(c) -> str:
        size = settings.batch_size if c.grade_id == exercise.batch_cell else None
        return reseed(c.code, settings.seed, size, seed_constant=exercise.definition.seed)

    return code


def fresh_written(exercise: GradedExercise, folder: Path, settings: JudgeSettings) -> FreshInputs:
    d = exercise.definition
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the replay computes
    try:
        ns = setup_values(exercise, folder, settings)
        start = {k: ns[k] for k in (*d.params, *d.data, *d.constants)}
        values, grads = definition_autograd(d, start)

        def backward():  # autograd's backward of the whole forward pass, what a hand one compares with
            definition_autograd(d, start)

        fresh = FreshInputs(values, grads, autograd_branches(values, grads, d), backward)
        if d.training is not None:
            add_training(fresh, exercise, ns, settings, reseeded(exercise, settings))
    finally:
        torch.set_num_threads(threads)
    return fresh
