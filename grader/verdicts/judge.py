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
from ..exercise.graded import GradedExercise
from ..exercise.verdict import Verdict
from ..reference.inputs import FreshInputs, dataset, fresh_inputs
from ..reference.written import fresh_written
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
from .settled import StandIns
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
    names_txt: Path | None = None,
    exercise: GradedExercise = spec.NINJA,
    folder: Path | None = None,
    in_kernel: dict[str, float] | None = None,
    sandbox: Sandbox | None = None,
    launcher: Launcher | None = None,
) -> JudgeRecord:
    """One pass: the replay's runs, every gradient's outcome compared once (outcomes.py), then
    the verdicts, their hints, the policy on autograd and on finite differences, the flags, the
    record. The replay runs in `sandbox`, default_sandbox() (as the environment is now) when None;
    `launcher` instead starts the replay server some other way, and only a caller that passes one
    runs the replay outside the sandbox (replay.client.launch_plain: tests of the judge's logic,
    c.ReplayGrades.sandboxed = False). Backprop Ninja's inputs come from `names_txt`; a written
    exercise's from its setup cells, run in `folder` (its source folder, with its files)."""
    if sandbox is not None and launcher is not None:
        raise ValueError("a sandbox or a launcher, not both")
    fresh, data = _inputs(exercise, names_txt, folder, settings)
    plan = replay_cells(cells, settings, exercise)
    launcher = launcher or functools.partial(launch_sandboxed, sandbox=sandbox or default_sandbox())
    first: dict = {}

    def then(main: RunResult) -> list[str]:  # exercise 1 as submitted, compared once, picks the runs
        first.update(outcomes.exercise1_as_submitted(main, fresh, exercise))
        return outcomes.runs_that_matter(first, exercise)

    again = over_budget(plan, fresh, settings, exercise)
    out = run_replay(
        plan,
        fresh,
        settings,
        exercise=exercise,
        data=data,
        then=then,
        again=again,
        settled=StandIns(fresh, exercise).settled_by,
        explains=lambda main: outcomes.wrong_when_blocked(main, fresh, exercise),
        trains_watched=lambda main: outcomes.watch_training(main, fresh, exercise),
        launcher=launcher,
    )
    try:
        with time_limit(settings.judge_seconds):
            found = outcomes.collect(out, fresh, first, exercise)
            verdicts = all_verdicts(found, fresh, settings, exercise)
            policy_flags = apply_policy(verdicts, found, out, settings.autograd_policy)
            policy_flags += apply_numeric(verdicts, out, plan, fresh, settings, exercise=exercise)
        overrun = None
    except JudgeTimeout as e:  # costs this submission only: the batch goes on
        overrun, policy_flags = str(e), []
        verdicts = {
            g.grade_id: Verdict(g.grade_id, 0.0, g.points, [overrun], hint=overrun, problem="judge_timeout")
            for g in exercise.graded
        }
    findings = scan_plan(plan)
    problems = [p for p in (out.problem, overrun) if p]
    return JudgeRecord(
        student,
        settings.seed,
        verdicts,
        findings,
        flags(findings, verdicts, in_kernel, exercise) + policy_flags,
        out.seconds,
        problems,
    )


def _inputs(
    exercise: GradedExercise, names_txt: Path | None, folder: Path | None, settings: JudgeSettings
) -> tuple[FreshInputs, dict[str, Path]]:
    """The fresh inputs, and the files the replay's runs read (their name inside -> the file)."""
    if exercise is spec.NINJA:
        return fresh_inputs(dataset(names_txt), settings), {"names.txt": names_txt}
    return fresh_written(exercise, folder, settings), {f: folder / f for f in exercise.definition.files}


def all_verdicts(
    found: outcomes.Outcomes,
    fresh: FreshInputs,
    settings: JudgeSettings,
    exercise: GradedExercise = spec.NINJA,
) -> dict[str, Verdict]:
    """Decide every gradient (exercise 1 in backward order, so that a gradient knows which of the
    gradients it received were wrong), then give each failure its hint."""
    verdicts, right, d = {}, {}, exercise.definition
    handed = {o.exercise: o.start for o in exercise.one_go}  # exercise -> the d<start> it is given
    n = settings.batch_size if exercise is spec.NINJA else _batch_size(fresh)
    for g in exercise.gradients:
        o = found.gradients[g.grade_id]
        wrong = []
        if g.exercise == 1:
            consumers = [c for c in d.consumers(g.target) if c != d.loss]
            wrong = [f"d{c}" for c in consumers if not right.get(f"d{c}", True)]
        decision = decide(o, wrong_inputs=wrong, carried_credit=settings.carried_credit)
        v = decision.verdict
        if decision.explain is not NOTHING:
            with_hint(v, hints.explain(o, decision.explain, found.main, fresh, n, exercise))
        if g.exercise == 1:
            right[g.name] = v.score == g.points and not v.carried
        if g.exercise in handed and v.score == g.points:
            v.lines.append(f"judged with the correct d{handed[g.exercise]}")
        if exercise.trains(g) and found.ex4_error and v.score < v.max_score:
            v.lines, v.hint = [found.ex4_error], found.ex4_error
        verdicts[g.grade_id] = v
    if found.trained is not None:
        verdicts[found.trained.grade_id] = found.trained
    return verdicts


def _batch_size(fresh: FreshInputs) -> int | None:
    """A written exercise's `n`, where its steps read one (the hints' factors of n)."""
    n = fresh.values.get("n")
    return n if isinstance(n, int) else None
