"""Where a submission's grades are decided: outside the student's process, on fresh inputs.

The judge draws fresh parameters and a fresh batch and computes the references here
(grader/reference/), has the replay run the student's cells on the same inputs in the
sandbox (grader/replay/), then decides each graded cell (grading.decide: as submitted, else
the student's own rule with correct inputs), explains each failure (hints.py) and lists signs
of cheating (scan.py, flags.py). Nothing the student's code does can reach the comparisons: they happen
in this process, on values validated as plain tensors.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import torch

from ..confine import Sandbox, default_sandbox
from ..exercise import spec
from ..exercise.compare import MISSING
from ..exercise.verdict import Verdict
from ..reference import steps
from ..reference.inputs import FreshInputs, dataset, fresh_inputs
from ..replay.client import Launcher, launch_sandboxed
from ..replay.plan import EX1, replay_cells
from ..replay.results import EX1_CELL, RunResult, Unusable
from ..replay.run import ReplayOutput, run_replay
from ..settings import JudgeSettings
from ..untrusted.protocol import AS_SUBMITTED, EX3, EX4, STATUS_OK, run_name_local, value_key
from . import hints
from .autograd import apply_policy
from .flags import Flag, flags, scan_plan
from .grading import decide
from .mistakes import known_mistakes
from .numeric import apply_numeric
from .scan import Finding
from .time_limit import JudgeTimeout, time_limit
from .training import training_verdict


@dataclass
class JudgeRecord:
    """One submission's grades and what explains them: reports/replay/<student>.json."""

    student: str
    seed: int
    verdicts: dict[str, Verdict]
    findings: list[Finding]
    suspicious: list[Flag]
    replay_seconds: float
    problems: list[str]

    def to_json(self) -> dict:
        return {
            "student": self.student,
            "seed": self.seed,
            "replay_seconds": round(self.replay_seconds, 3),
            "score": sum(v.score for v in self.verdicts.values()),
            "max_score": sum(v.max_score for v in self.verdicts.values()),
            "problems": self.problems,
            "flags": [f.to_json() for f in self.suspicious],
            "findings": [f.text() for f in self.findings],
            "verdicts": {
                k: {
                    "score": v.score,
                    "max_score": v.max_score,
                    "carried": v.carried,
                    "hint": v.hint,
                    "lines": v.lines,
                }
                for k, v in self.verdicts.items()
            },
        }


def judge_submission(
    cells,
    *,
    student: str,
    settings: JudgeSettings,
    names_txt: Path,
    in_kernel: dict[str, float] | None = None,
    sandbox: Sandbox | None = None,
    launcher: Launcher | None = None,
) -> JudgeRecord:
    """The replay runs in `sandbox`, default_sandbox() (as the environment is now) when None;
    `launcher` instead starts the replay server some other way, and only a caller that passes one
    runs the replay outside the sandbox (replay.client.launch_plain: tests of the judge's logic,
    c.ReplayGrades.sandboxed = False)."""
    if sandbox is not None and launcher is not None:
        raise ValueError("a sandbox or a launcher, not both")
    fresh = fresh_inputs(dataset(names_txt), settings)
    plan = replay_cells(cells, settings)
    launcher = launcher or functools.partial(launch_sandboxed, sandbox=sandbox or default_sandbox())
    out = run_replay(plan, fresh, settings, names_txt=names_txt, launcher=launcher)
    try:
        with time_limit(settings.judge_seconds):
            verdicts = all_verdicts(out, fresh, settings)
            autograd_flags = apply_policy(verdicts, out, fresh, settings.autograd_policy)
            autograd_flags += apply_numeric(verdicts, out, plan, fresh, settings)
        overrun = None
    except JudgeTimeout as e:  # costs this submission only: the batch goes on
        overrun, autograd_flags = str(e), []
        verdicts = {
            g.grade_id: Verdict(g.grade_id, 0.0, g.points, [overrun], hint=overrun, problem="judge_timeout")
            for g in spec.GRADED
        }
    findings = scan_plan(plan)
    problems = [p for p in (out.problem, overrun) if p]
    return JudgeRecord(
        student,
        settings.seed,
        verdicts,
        findings,
        flags(findings, verdicts, in_kernel) + autograd_flags,
        out.seconds,
        problems,
    )


class Hints:
    """The hint for a failed gradient, from what the replay saw of the notebook as submitted."""

    def __init__(self, as_submitted: RunResult, fresh: FreshInputs, settings: JudgeSettings):
        self.run, self.fresh, self.n = as_submitted, fresh, settings.batch_size
        self.errors = as_submitted.meta.get("errors", [])

    def maker(
        self,
        name: str,
        reference: torch.Tensor,
        *,
        branches=None,
        cell: str | None = None,
        errors: list | None = None,
    ):
        errors = self.errors if errors is None else errors

        def make(value):
            if value is MISSING and self.run.status not in (STATUS_OK, "skipped"):
                return f"the replay of your notebook stopped before this was computed: {self.run.status}"
            if value is MISSING:
                return hints.missing(name, names=self.run.meta.get("names", []), errors=errors, cell=cell)
            if not isinstance(value, torch.Tensor):
                return value.message if isinstance(value, Unusable) else None
            return hints.value_hint(
                name,
                value,
                reference,
                n=self.n,
                branches=branches,
                aliases=self.run.meta.get("aliases", []),
                mistakes=known_mistakes(name, self.fresh.values, self.fresh.grads),
                n_seen=self.run.meta.get("n_at", {}).get(cell) if cell else None,
            )

        return make


def all_verdicts(out: ReplayOutput, fresh: FreshInputs, settings: JudgeSettings) -> dict[str, Verdict]:
    as_submitted = out.runs[AS_SUBMITTED]
    hint = Hints(as_submitted, fresh, settings)
    verdicts = exercise1_verdicts(out, fresh, settings, hint)
    verdicts.update(exercise2_3_verdicts(out, fresh, hint))
    verdicts.update(exercise4_verdicts(as_submitted, fresh, hint))
    return verdicts


def exercise1_verdicts(out: ReplayOutput, fresh: FreshInputs, settings: JudgeSettings, hint: Hints) -> dict:
    """In backward order, so that a gradient knows which of the gradients it received were wrong."""
    as_submitted, verdicts, right = out.runs[AS_SUBMITTED], {}, {}
    for g in EX1:
        ref = fresh.grads[g.target]
        own_run = out.runs.get(run_name_local(g.name))
        alone = own_run.value(value_key(None, g.name)) if own_run and own_run.status != "skipped" else None
        consumers = [c for c in steps.consumers(g.target) if c != "loss"]
        wrong = [f"d{c}" for c in consumers if not right.get(f"d{c}", True)]
        branches = fresh.branches.get(g.target) if len(steps.consumers(g.target)) > 1 else None
        errors = hint.errors + (own_run.meta.get("errors", []) if own_run else [])
        v = decide(
            g,
            as_submitted=as_submitted.value(value_key(EX1_CELL, g.name)),
            reference=ref,
            with_correct_inputs=alone,
            wrong_inputs=wrong,
            carried_credit=settings.carried_credit,
            hint=hint.maker(g.name, ref, branches=branches, cell=EX1_CELL, errors=errors),
        )
        right[g.name] = v.score == g.points and not v.carried
        verdicts[g.grade_id] = v
    return verdicts


def exercise2_3_verdicts(out: ReplayOutput, fresh: FreshInputs, hint: Hints) -> dict:
    ex2, ex3 = (next(g for g in spec.GRADIENTS if g.exercise == k) for k in (2, 3))
    cell2, cell3 = spec.ANSWER_CELLS[2], spec.ANSWER_CELLS[3]
    v2 = decide(
        ex2,
        as_submitted=out.runs[AS_SUBMITTED].value(value_key(cell2, "dlogits")),
        reference=fresh.grads["logits"],
        hint=hint.maker("dlogits", fresh.grads["logits"], cell=cell2),
    )
    run3 = out.runs[EX3]
    v3 = decide(
        ex3,
        as_submitted=run3.value(value_key(None, "dhprebn")),
        reference=fresh.grads["hprebn"],
        hint=hint.maker(
            "dhprebn", fresh.grads["hprebn"], cell=cell3, errors=hint.errors + run3.meta.get("errors", [])
        ),
    )
    if v3.score == ex3.points:
        v3.lines.append("judged with the correct dhpreact")
    return {ex2.grade_id: v2, ex3.grade_id: v3}


def exercise4_verdicts(as_submitted: RunResult, fresh: FreshInputs, hint: Hints) -> dict:
    ex4_error = as_submitted.meta.get("ex4_error") or (
        None if as_submitted.status == STATUS_OK else f"the replay run {as_submitted.status}"
    )
    verdicts = {}
    for g in (g for g in spec.GRADIENTS if g.exercise == 4):
        ref = fresh.ex4_reference[g.target]
        v = decide(
            g,
            as_submitted=as_submitted.value(value_key(EX4, g.name)),
            reference=ref,
            hint=hint.maker(g.name, ref),
        )
        if ex4_error and v.score < v.max_score:
            v.lines, v.hint = [ex4_error], ex4_error
        verdicts[g.grade_id] = v
    verdicts[spec.TRAINING.grade_id] = training_verdict(as_submitted, fresh, ex4_error)
    return verdicts
