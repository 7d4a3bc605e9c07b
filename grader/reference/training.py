"""A written exercise's training exercise, judge-side: manual_backward's inputs (the forward
pass of the student's fresh start) and autograd's answer; the batches the replay trains on,
drawn by the notebook's own batch cell run again; a held-out set drawn after them; and the
same training run with autograd's gradients, which the student's must come close to."""

from __future__ import annotations

import contextlib
import io

import torch

from ..exercise.graded import GradedExercise
from ..settings import JudgeSettings
from ..untrusted.protocol import batch_key
from .inputs import FreshInputs
from .steps import definition_autograd

EVAL_BATCHES = 20  # the held-out set: this many batches more, drawn after the training's
# The student's run must reach this share of the reference run's fall in loss: a backward
# that learns at half the rate passes; one that learns nothing, or the wrong way, does not.
TRAINING_SHARE = 0.75


def add_training(
    fresh: FreshInputs, exercise: GradedExercise, ns: dict, settings: JudgeSettings, code=lambda c: c.code
) -> None:
    """`code`: a setup cell's code as the replay runs it (reseeded)."""
    d = exercise.definition
    fixed = {k: ns[k] for k in d.constants}
    fresh.numbers = {k: v for k, v in fixed.items() if type(v) in (int, float)}
    fresh.ex4_inputs = {k: t for k, t in fresh.values.items() if k in d.backward_arguments and _tensor(t)}
    fresh.ex4_reference = {p: fresh.grads[p] for p in d.params}
    batches = draw_batches(exercise, ns, settings.train_steps + EVAL_BATCHES, code)
    train, held_out = batches[: settings.train_steps], batches[settings.train_steps :]
    start = {p: fresh.values[p].clone() for p in d.params}
    fresh.train = {
        **start,
        **{k: t for k, t in fixed.items() if _tensor(t)},
        **{batch_key(i, k): b[k] for i, b in enumerate(train) for k in d.data},
    }

    def evaluate(params: dict) -> float:
        with torch.no_grad():
            losses = [float(d.forward({**params, **b, **fixed})[d.loss]) for b in held_out]
        return sum(losses) / len(losses)

    fresh.evaluate = evaluate
    params = dict(start)
    for b in train:  # the replay's run (grader/untrusted/training_batches.py) with autograd's backward
        _, grads = definition_autograd(d, {**params, **b, **fixed})
        params = {p: params[p] - exercise.learning_rate * grads[p] for p in d.params}
    fresh.initial_eval_loss, fresh.reference_train_loss = evaluate(start), evaluate(params)
    fresh.train_tolerance = (1 - TRAINING_SHARE) * (fresh.initial_eval_loss - fresh.reference_train_loss)


def draw_batches(exercise: GradedExercise, ns: dict, count: int, code=lambda c: c.code) -> list[dict]:
    """`count` batches of the exercise's data, its batch cell run again in the setup's namespace (its
    generator goes on where the setup left it); without a batch cell, its one fixed batch."""
    d = exercise.definition
    cell = next((c for c in d.setup if c.grade_id == exercise.batch_cell), None)
    if cell is None:
        return [{n: ns[n] for n in d.data}] * count
    compiled, out = compile(code(cell), f"<{d.name}: {cell.grade_id}>", "exec"), []
    with contextlib.redirect_stdout(io.StringIO()), torch.random.fork_rng():
        for _ in range(count):
            exec(compiled, ns)  # the instructor's own cell
            out.append({n: ns[n] for n in d.data})
    return out


def _tensor(t) -> bool:
    return isinstance(t, torch.Tensor)
