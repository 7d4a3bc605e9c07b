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

from ..confine import Sandbox, default_sandbox
from ..exercise import spec
from ..exercise.verdict import Verdict
from ..reference import steps
from ..reference.inputs import FreshInputs, dataset, fresh_inputs
from ..replay.client import Launcher, launch_sandboxed
from ..replay.plan import replay_cells
from ..replay.results import RunResult
from ..replay.run import run_replay
from ..settings import JudgeSettings
from . import hints, outcomes
from .autograd import apply_policy
from .flags import Flag, flags, scan_plan
from .grading import NOTHING, decide, with_hint
from .numeric import apply_numeric, over_budget
from .scan import Finding
from .time_limit import JudgeTimeout, time_limit


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
    """One pass: the replay's runs, every gradient's outcome compared once (outcomes.py), then
    the verdicts, their hints, the policy on autograd and on finite differences, the flags, the
    record. The replay runs in `sandbox`, default_sandbox() (as the environment is now) when None;
    `launcher` instead starts the replay server some other way, and only a caller that passes one
    runs the replay outside the sandbox (replay.client.launch_plain: tests of the judge's logic,
    c.ReplayGrades.sandboxed = False)."""
    if sandbox is not None and launcher is not None:
        raise ValueError("a sandbox or a launcher, not both")
    fresh = fresh_inputs(dataset(names_txt), settings)
    plan = replay_cells(cells, settings)
    launcher = launcher or functools.partial(launch_sandboxed, sandbox=sandbox or default_sandbox())
    first: dict = {}

    def then(main: RunResult) -> list[str]:  # exercise 1 as submitted, compared once, picks the runs
        first.update(outcomes.exercise1_as_submitted(main, fresh))
        return outcomes.runs_that_matter(first)

    again = over_budget(plan, fresh, settings)
    out = run_replay(plan, fresh, settings, names_txt=names_txt, then=then, again=again, launcher=launcher)
    try:
        with time_limit(settings.judge_seconds):
            found = outcomes.collect(out, fresh, first)
            verdicts = all_verdicts(found, fresh, settings)
            policy_flags = apply_policy(verdicts, found, out, settings.autograd_policy)
            policy_flags += apply_numeric(verdicts, out, plan, fresh, settings)
        overrun = None
    except JudgeTimeout as e:  # costs this submission only: the batch goes on
        overrun, policy_flags = str(e), []
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
        flags(findings, verdicts, in_kernel) + policy_flags,
        out.seconds,
        problems,
    )


def all_verdicts(found: outcomes.Outcomes, fresh: FreshInputs, settings: JudgeSettings) -> dict[str, Verdict]:
    """Decide every gradient (exercise 1 in backward order, so that a gradient knows which of the
    gradients it received were wrong), then give each failure its hint."""
    verdicts, right = {}, {}
    for g in spec.GRADIENTS:
        o = found.gradients[g.grade_id]
        wrong = []
        if g.exercise == 1:
            consumers = [c for c in steps.consumers(g.target) if c != "loss"]
            wrong = [f"d{c}" for c in consumers if not right.get(f"d{c}", True)]
        decision = decide(o, wrong_inputs=wrong, carried_credit=settings.carried_credit)
        v = decision.verdict
        if decision.explain is not NOTHING:
            with_hint(v, hints.explain(o, decision.explain, found.main, fresh, settings.batch_size))
        if g.exercise == 1:
            right[g.name] = v.score == g.points and not v.carried
        if g.exercise == 3 and v.score == g.points:
            v.lines.append("judged with the correct dhpreact")
        if g.exercise == 4 and found.ex4_error and v.score < v.max_score:
            v.lines, v.hint = [found.ex4_error], found.ex4_error
        verdicts[g.grade_id] = v
    verdicts[spec.TRAINING.grade_id] = found.trained
    return verdicts
