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
from ..exercise.verdict import Verdict, compare_gradient
from ..reference import steps
from ..reference.inputs import FreshInputs
from ..replay.plan import EX1, run_order
from ..replay.results import EX1_CELL, RunResult
from ..replay.run import ReplayOutput
from ..untrusted.protocol import (
    AS_SUBMITTED,
    EX3,
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

    gradient: spec.Gradient
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
    trained: Verdict  # exercise 4's training point, as graded
    trained_blocked: bool | None = None  # the training point in the blocked / watched runs
    trained_watched: bool | None = None


def exercise1_as_submitted(main: RunResult, fresh: FreshInputs) -> dict[str, Comparison]:
    """Exercise 1's gradients as submitted, by name: what decides which own-rule runs to make."""
    return {
        g.name: compare_gradient(g, main.value(value_key(EX1_CELL, g.name)), fresh.grads[g.target])
        for g in EX1
    }


def runs_that_matter(first: dict[str, Comparison]) -> list[str]:
    """Exercise 3's run, and the own-rule run of every exercise-1 gradient that failed as submitted."""
    failed = {name for name, c in first.items() if not c.ok}
    return [r for r in run_order()[1:] if r == EX3 or parse_run_name(r)[1] in failed]


def _reference(g: spec.Gradient, fresh: FreshInputs) -> torch.Tensor:
    return (fresh.ex4_reference if g.exercise == 4 else fresh.grads)[g.target]


def _right_in(run: RunResult | None, g: spec.Gradient, fresh: FreshInputs) -> bool | None:
    """Right in one of the notebook's runs as submitted (its own cell's value, exercise 3's too)."""
    if run is None:
        return None
    where = EX4 if g.exercise == 4 else spec.ANSWER_CELLS[g.exercise]
    return compare_gradient(g, run.value(value_key(where, g.name)), _reference(g, fresh)).ok


def _exercise1(out: ReplayOutput, fresh: FreshInputs, first: dict[str, Comparison], g) -> Outcome:
    main, own_run = out.runs[AS_SUBMITTED], out.runs.get(run_name_local(g.name))
    alone = own_run.value(value_key(None, g.name)) if own_run and own_run.status != SKIPPED else None
    ref, value = fresh.grads[g.target], main.value(value_key(EX1_CELL, g.name))
    return Outcome(
        g,
        ref,
        value,
        first.get(g.name) or compare_gradient(g, value, ref),
        own_rule=alone,
        own=compare_gradient(g, alone, ref) if alone is not None else None,
        cell=EX1_CELL,
        errors=main.meta.get("errors", []),
        own_errors=own_run.meta.get("errors", []) if own_run else [],
        branches=fresh.branches.get(g.target) if len(steps.consumers(g.target)) > 1 else None,
        renamed=(_holder(own_run, ref) or _holder(main, ref)) if value is MISSING else None,
    )


def _holder(run: RunResult | None, ref: torch.Tensor) -> str | None:
    """The student's own name whose tensor (runner.py's OWN values) is this gradient's value."""
    for i, name in enumerate(run.meta.get("own", []) if run and run.status != SKIPPED else []):
        t = run.value(value_key(OWN, str(i)))
        if isinstance(t, torch.Tensor) and relations.close(t, ref):
            return name
    return None


def _later(out: ReplayOutput, fresh: FreshInputs, g) -> Outcome:
    """Exercises 2, 3 and 4: one value each, as submitted (exercise 3 in its own run)."""
    main, ref = out.runs[AS_SUBMITTED], _reference(g, fresh)
    errors = main.meta.get("errors", [])
    if g.exercise == 3:
        run3 = out.runs[EX3]
        value, errors = run3.value(value_key(None, g.name)), errors + run3.meta.get("errors", [])
    else:
        value = main.value(value_key(EX4 if g.exercise == 4 else spec.ANSWER_CELLS[g.exercise], g.name))
    cell = spec.ANSWER_CELLS.get(g.exercise) if g.exercise in (2, 3) else None
    return Outcome(g, ref, value, compare_gradient(g, value, ref), cell=cell, errors=errors)


def _trained(run: RunResult | None, fresh: FreshInputs) -> bool | None:
    if run is None:
        return None
    v = training_verdict(run, fresh, run.meta.get("ex4_error"))
    return v.score == v.max_score


def collect(out: ReplayOutput, fresh: FreshInputs, first: dict[str, Comparison] | None = None) -> Outcomes:
    """Every comparison of the submission, once. `first`: exercise 1 as submitted, if the judge
    has compared it already (to choose the runs)."""
    first = first or {}
    gradients = {}
    for g in spec.GRADIENTS:
        o = _exercise1(out, fresh, first, g) if g.exercise == 1 else _later(out, fresh, g)
        if out.blocked is not None and out.watched is not None:
            o.blocked, o.watched = _right_in(out.blocked, g, fresh), _right_in(out.watched, g, fresh)
        gradients[g.grade_id] = o
    main = out.runs[AS_SUBMITTED]
    ex4_error = main.meta.get("ex4_error") or (
        None if main.status == STATUS_OK else f"the replay run {main.status}"
    )
    ex4_error = ex4_error and raised.in_words(ex4_error, main.meta.get("names", []))
    found = Outcomes(gradients, main, ex4_error, training_verdict(main, fresh, ex4_error))
    if out.blocked is not None and out.watched is not None:
        found.trained_blocked, found.trained_watched = (
            _trained(out.blocked, fresh),
            _trained(out.watched, fresh),
        )
    return found
