"""Every gradient's results across a submission's replay runs, compared with the reference once:
as submitted, on its own rule (handed correct upstream gradients), and in the notebook's blocked
and watched runs. The judge decides, hints and applies the policy from these; nothing after this
compares a value again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..exercise import spec
from ..exercise.compare import MISSING, Comparison
from ..exercise.definition import Gradient
from ..exercise.graded import GradedExercise
from ..exercise.verdict import Verdict, compare_gradient
from ..reference.inputs import FreshInputs
from ..replay.plan import run_order
from ..replay.results import RunResult
from ..replay.run import ReplayOutput
from ..untrusted.protocol import (
    AS_SUBMITTED,
    EX4,
    OWN,
    STATUS_OK,
    parse_run_name,
    run_name_local,
    value_key,
)
from . import raised, relations
from .training import training_verdict

SKIPPED = "skipped"  # a run the judge did not need (ReplayOutput fills it in)


@dataclass
class Outcome:
    """One gradient: what decides its grade, and what a hint needs to explain a failure."""

    gradient: Gradient
    reference: torch.Tensor
    graded: object  # as submitted (exercise 3: its own run, handed the correct dhpreact)
    as_is: Comparison
    own_rule: object = None  # exercise 1's value on its own rule; None: not run
    own: Comparison | None = None
    cell: str | None = None  # the answer cell a hint points into
    errors: list = field(default_factory=list)  # the statements that raised, as submitted
    own_errors: list = field(default_factory=list)  # ... and in the own-rule run (exercise 1)
    branches: dict | None = None  # a gradient with several consumers: each branch's part
    blocked: bool | None = None  # right in the notebook's blocked / watched run (None: no such run)
    watched: bool | None = None
    renamed: str | None = None  # unassigned, but a name of the student's own holds its value


@dataclass
class Outcomes:
    gradients: dict[str, Outcome]  # by grade id
    main: RunResult  # the notebook as submitted, as graded
    ex4_error: str | None  # why exercise 4 has no gradients, if it has none
    trained: Verdict | None  # exercise 4's training point, as graded (None: no training exercise)
    trained_blocked: bool | None = None  # the training point in the blocked / watched runs
    trained_watched: bool | None = None


def exercise1_as_submitted(
    main: RunResult, fresh: FreshInputs, exercise: GradedExercise
) -> dict[str, Comparison]:
    """Exercise 1's gradients as submitted, by name: what decides which own-rule runs to make."""
    cell = exercise.answer_cell(1)
    return {
        g.name: compare_gradient(g, main.value(value_key(cell, g.name)), fresh.grads[g.target], exercise)
        for g in exercise.exercise1
    }


def runs_that_matter(first: dict[str, Comparison], exercise: GradedExercise) -> list[str]:
    """The in-one-go runs, and the own-rule run of every exercise-1 gradient that failed as submitted."""
    failed = {name for name, c in first.items() if not c.ok}
    one_go = {o.run for o in exercise.one_go}
    return [r for r in run_order(exercise)[1:] if r in one_go or parse_run_name(r)[1] in failed]


def _reference(g, fresh: FreshInputs, exercise: GradedExercise) -> torch.Tensor:
    return (fresh.ex4_reference if exercise.trains(g) else fresh.grads)[g.target]


def _right_in(run: RunResult | None, g, fresh: FreshInputs, exercise: GradedExercise) -> bool | None:
    """Right in one of the notebook's runs as submitted (its own cell's value, exercise 3's too)."""
    if run is None:
        return None
    where = EX4 if exercise.trains(g) else exercise.answer_cell(g.exercise)
    return compare_gradient(
        g, run.value(value_key(where, g.name)), _reference(g, fresh, exercise), exercise
    ).ok


def _exercise1(out: ReplayOutput, fresh: FreshInputs, first: dict[str, Comparison], g, exercise) -> Outcome:
    main, own_run = out.runs[AS_SUBMITTED], out.runs.get(run_name_local(g.name))
    alone = own_run.value(value_key(None, g.name)) if own_run and own_run.status != SKIPPED else None
    cell = exercise.answer_cell(1)
    ref, value = fresh.grads[g.target], main.value(value_key(cell, g.name))
    return Outcome(
        g,
        ref,
        value,
        first.get(g.name) or compare_gradient(g, value, ref, exercise),
        own_rule=alone,
        own=compare_gradient(g, alone, ref, exercise) if alone is not None else None,
        cell=cell,
        errors=main.meta.get("errors", []),
        own_errors=own_run.meta.get("errors", []) if own_run else [],
        branches=fresh.branches.get(g.target) if len(exercise.definition.consumers(g.target)) > 1 else None,
        renamed=(_holder(own_run, ref) or _holder(main, ref)) if value is MISSING else None,
    )


def _holder(run: RunResult | None, ref: torch.Tensor) -> str | None:
    """The student's own name whose tensor (runner.py's OWN values) is this gradient's value."""
    for i, name in enumerate(run.meta.get("own", []) if run and run.status != SKIPPED else []):
        t = run.value(value_key(OWN, str(i)))
        if isinstance(t, torch.Tensor) and relations.close(t, ref):
            return name
    return None


def _later(out: ReplayOutput, fresh: FreshInputs, g, exercise: GradedExercise) -> Outcome:
    """The exercises after the first: one value each, as submitted (an in-one-go exercise below
    the loss in its own run, Backprop Ninja's exercise 3; its exercise 4 from manual_backward)."""
    main, ref = out.runs[AS_SUBMITTED], _reference(g, fresh, exercise)
    errors = main.meta.get("errors", [])
    own = next((o.run for o in exercise.one_go if o.exercise == g.exercise), None)
    if own:
        run = out.runs[own]
        value, errors = run.value(value_key(None, g.name)), errors + run.meta.get("errors", [])
    else:
        value = main.value(value_key(EX4 if exercise.trains(g) else exercise.answer_cell(g.exercise), g.name))
    cell = None if exercise.trains(g) else exercise.answer_cell(g.exercise)
    return Outcome(g, ref, value, compare_gradient(g, value, ref, exercise), cell=cell, errors=errors)


def wrong_when_blocked(main: RunResult, fresh: FreshInputs, exercise: GradedExercise = spec.NINJA) -> bool:
    """Whether the notebook as submitted, autograd blocked, got a gradient or the training point
    wrong: the only outcomes its watched run could show autograd made (autograd.made_by_autograd).
    Where it got none wrong (a right answer that checks itself with loss.backward()), the watched
    run would change no verdict and no flag, and is not made."""
    if any(_right_in(main, g, fresh, exercise) is False for g in exercise.gradients):
        return True
    return watch_training(main, fresh, exercise)


def watch_training(main: RunResult, fresh: FreshInputs, exercise: GradedExercise = spec.NINJA) -> bool:
    """Whether the watched run trains too (exercise 4's loop, 100 steps of the student's backward):
    only where the blocked run lost the training point. Elsewhere autograd made nothing of it
    (autograd.made_by_autograd), whatever the watched run's training would show."""
    return _trained(main, fresh, exercise) is False


def _trained(run: RunResult | None, fresh: FreshInputs, exercise: GradedExercise) -> bool | None:
    if run is None or exercise.training is None:
        return None
    v = training_verdict(run, fresh, run.meta.get("ex4_error"), exercise)
    return v.score == v.max_score


def collect(
    out: ReplayOutput,
    fresh: FreshInputs,
    first: dict[str, Comparison] | None = None,
    exercise: GradedExercise = spec.NINJA,
) -> Outcomes:
    """Every comparison of the submission, once. `first`: exercise 1 as submitted, if the judge
    has compared it already (to choose the runs)."""
    first = first or {}
    gradients = {}
    for g in exercise.gradients:
        o = _exercise1(out, fresh, first, g, exercise) if g.exercise == 1 else _later(out, fresh, g, exercise)
        if out.blocked is not None and out.watched is not None:
            o.blocked = _right_in(out.blocked, g, fresh, exercise)
            o.watched = _right_in(out.watched, g, fresh, exercise)
        gradients[g.grade_id] = o
    main = out.runs[AS_SUBMITTED]
    ex4_error = main.meta.get("ex4_error") or (
        None if main.status == STATUS_OK else f"the replay run {main.status}"
    )
    ex4_error = ex4_error and raised.in_words(ex4_error, main.meta.get("names", []))
    trained = training_verdict(main, fresh, ex4_error, exercise) if exercise.training is not None else None
    found = Outcomes(gradients, main, ex4_error, trained)
    if out.blocked is not None and out.watched is not None:
        found.trained_blocked = _trained(out.blocked, fresh, exercise)
        found.trained_watched = _trained(out.watched, fresh, exercise)
    return found
