"""Running one submission's replay: write its plan and inputs to the exchange folder, send the
runs to the warm server one at a time, and validate each result before the next run starts.
Trusted side; the runs themselves happen in grader/untrusted/."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..exercise.graded import GradedExercise
from ..reference.inputs import FreshInputs
from ..settings import JudgeSettings
from ..untrusted.protocol import (
    AS_SUBMITTED,
    BLOCK,
    INJECT_FILE,
    INPUTS_FILE,
    OPEN,
    PLAN_FILE,
    STATUS_OK,
    STATUS_TIMED_OUT,
    WATCH,
    ReplayPlan,
)
from . import results
from .client import Launcher, ReplayServer, exchange_root, launch_sandboxed, server_for
from .plan import joint_runs, run_order, warm_prefix, what_is_asked, with_correct_inputs
from .results import RunResult


@dataclass
class ReplayOutput:
    """`runs` decide the grades, all in `mode` (blocked, or open under the "flag" policy);
    `counterpart` is the notebook as submitted the other way (watched, or blocked)."""

    runs: dict[str, RunResult]
    seconds: float
    problem: str | None = None
    mode: str = BLOCK
    counterpart: RunResult | None = None

    @property
    def blocked(self) -> RunResult | None:
        return self.runs.get(AS_SUBMITTED) if self.mode == BLOCK else self.counterpart

    @property
    def watched(self) -> RunResult | None:
        return self.counterpart if self.mode == BLOCK else self.runs.get(AS_SUBMITTED)


def write_plan(
    work: Path, cells: list, fresh: FreshInputs, settings: JudgeSettings, data: dict[str, Path], asked: dict
) -> None:
    data_dir = work / "data"
    data_dir.mkdir()
    for name, path in data.items():  # the notebook's files (names.txt): the replay reads them
        shutil.copy(path, data_dir / name)
        os.chmod(data_dir / name, 0o444)  # nobody may change them
    plan: ReplayPlan = {
        "cells": cells,
        "first_answer": next((i for i, c in enumerate(cells) if c["kind"] == "answer"), len(cells)),
        "data_dir": str(data_dir),
        "train_seed": settings.train_seed,
        "train_steps": settings.train_steps,
        "statement_seconds": settings.statement_seconds,
        "run_tmp_mb": settings.run_tmp_mb,
        **asked,
    }
    if plan.get("training"):  # a written exercise's sizes travel as numbers (inputs are tensors only)
        plan["training"] = {**plan["training"], "numbers": fresh.numbers}
    (work / PLAN_FILE).write_text(json.dumps(plan))
    torch.save({"ex4": fresh.ex4_inputs, "train": fresh.train}, work / INPUTS_FILE)


@dataclass
class _Runs:
    """One submission's runs, sent to the server one at a time: the time they share, and the
    timeout that a looping answer shortens for the rest."""

    server: ReplayServer
    work: Path
    fresh: FreshInputs
    settings: JudgeSettings
    data: dict[str, Path]
    exercise: GradedExercise
    expected: dict
    t0: float = field(default_factory=time.perf_counter)

    def __post_init__(self):
        self.timeout = self.settings.run_timeout

    def one(
        self,
        run: str,
        autograd: str,
        statement_seconds: float | None = None,
        group: bool = False,
        train: bool = True,
    ) -> RunResult:
        total = self.settings.total_timeout
        if time.perf_counter() - self.t0 > total:
            return RunResult(f"not run: the submission's {total:g} s were used up")
        torch.save(with_correct_inputs(run, self.fresh.grads, self.exercise), self.work / INJECT_FILE)
        status, frame, cpu, pace = self.server.replay(
            self.work,
            run=run,
            data=self.data,
            timeout=self.timeout,
            autograd=autograd,
            statement_seconds=statement_seconds,
            group=group,
            train=train,
        )
        if status.startswith(STATUS_TIMED_OUT):
            self.timeout = min(self.timeout, 5.0)  # a looping answer loops in every run: cap the rest
        return results.parse_frame(frame, status, self.expected, cpu, pace)

    def graded(
        self, run: str, mode: str, again: Callable[[RunResult], bool], group: bool = False
    ) -> RunResult:
        """A run that decides grades; once more where `again` says so, alone, and the second kept."""
        result = self.one(run, mode, group=group)
        return self.one(run, mode) if result.status == STATUS_OK and again(result) else result


def run_replay(
    cells: list,
    fresh: FreshInputs,
    settings: JudgeSettings,
    *,
    exercise: GradedExercise,
    data: dict[str, Path],
    then: Callable[[RunResult], list[str]],
    again: Callable[[RunResult], bool] = lambda run: False,
    settled: Callable[[str, dict[str, RunResult]], str | None] = lambda run, made: None,
    explains: Callable[[RunResult], bool] = lambda main: True,
    trains_watched: Callable[[RunResult], bool] = lambda main: True,
    launcher: Launcher = launch_sandboxed,
) -> ReplayOutput:
    """In the sandbox unless `launcher` says otherwise (client.launch_plain: tests only). The
    notebook as submitted first; then, one at a time, each read before the next, the runs `then`
    names from its result (the judge's choice, verdicts/outcomes.py). All have autograd blocked
    ("zero", the default policy) or open ("flag"); the notebook as submitted runs once more the
    other way (under "zero" only where it reached for autograd): which gradients autograd made.
    A graded run that `again` marks (over the numeric bound, verdicts/numeric.py) runs once more,
    and its second result is the one kept. A run that `settled` names an earlier made run for
    (verdicts/settled.py) is not made: that run's values stand for it (RunResult.by). The watched
    run is made only where `explains` says it could explain something of the blocked notebook's
    (verdicts/outcomes.wrong_when_blocked), and trains (exercise 4's loop) only where
    `trains_watched` says its training could (verdicts/outcomes.watch_training)."""
    mode = BLOCK if settings.autograd_policy == "zero" else OPEN
    work = Path(tempfile.mkdtemp(prefix="replay-", dir=exchange_root()))
    try:
        os.chmod(work, 0o755)
        write_plan(work, cells, fresh, settings, data, what_is_asked(exercise))
        server = server_for(warm_prefix(cells, exercise), launcher)
        r = _Runs(server, work, fresh, settings, data, exercise, results.expected_shapes(fresh, exercise))
        runs = {AS_SUBMITTED: r.graded(AS_SUBMITTED, mode, again)}
        made: dict[str, RunResult] = {}
        for run in joint_runs(then(runs[AS_SUBMITTED]), exercise):  # one run group (run_group.py)
            by = settled(run, made)
            if by:
                runs.update(results.stand_ins(run, made[by], by))
                continue
            made[run] = r.graded(run, mode, again, group=True)
            runs.update(results.each_gradients(run, made[run]))
        # "zero": a watched run where the notebook reached for autograd, only to explain (3x the
        # statement limit: torch.func's first use imports torch._dynamo, seconds);
        # "flag": graded as if autograd were allowed, and always a blocked run to compare with
        if mode == BLOCK:
            main = runs[AS_SUBMITTED]
            reached = main.meta.get("autograd") and explains(main)
            seconds = 3 * settings.statement_seconds
            counterpart = r.one(AS_SUBMITTED, WATCH, seconds, train=trains_watched(main)) if reached else None
        else:
            counterpart = r.one(AS_SUBMITTED, BLOCK)
        (work / INJECT_FILE).unlink(missing_ok=True)
        runs.update({name: RunResult("skipped") for name in run_order(exercise) if name not in runs})
        fine = (STATUS_OK, "skipped")
        problems = [f"run {k}: {res.status}" for k, res in runs.items() if res.status not in fine]
        return ReplayOutput(runs, time.perf_counter() - r.t0, "; ".join(problems) or None, mode, counterpart)
    finally:
        shutil.rmtree(work, ignore_errors=True)
