"""Gradients computed numerically earn nothing: finite differences need no derivative at all.

A derived backward costs about what a forward pass costs; finite differences cost a forward
pass per side of each perturbed element, and every gradient has 27 elements or more (54
forward passes). So each exercise's student cells (its answer cell and the cells the student
added whose names it reads) may take `numeric_factor` times what the reference's derived
backward costs (grader/reference/steps.py), and never under `numeric_floor_seconds`. Both are
CPU time on the same machine, to the nanosecond, so the bound moves with the machine's speed: a
fixed floor in seconds, and a forward pass timed at the clock tick, let a faster machine's
finite differences through.

A virtual core's pace moves by 2x and more within a second, and two cores' hardly agree: with
the backward timed once in the judge's process, d05's finite differences (155 elements) came to
91 to 394 units from one check to the next, and d07's honest cells to 34 to 91, across the
bound. So a run's unit is the backward's cost at that run's pace (grader/exercise/pace.py): the
judge times the backward and the pace work in turns (their ratio held within 7% while either
moved by 2x), and the replay server times the pace work just before and after each run, pinned
with the run to one core (grader/untrusted/pinning.py). A run the server gave no pace for is
judged with the judge's own timing.

In that unit, cells counted without their system time (runner.py): honest answer cells take 37
at most (a cell that burns 200,000 Python iterations of its own, d07: 44 to 71 on a 2-core
virtual machine with its other core busy); central differences over the three smallest
gradients (d05, 155 elements) 126 to 268 there (177 to 192 on a quieter machine), over every
parameter 1,200 and more. A run over the bound is run once more and its second result is the
one judged (replay/run.py): a pause does not happen twice, finite differences do, and an answer
that does them only now and then is graded on a run that did not.

The runs count their cells' CPU seconds (grader/untrusted/runner.py); the kernel counts each
run's user time (the server's wait4): a run whose own count falls short of the kernel's by more
than NUMERIC_UNACCOUNTED_SECONDS is listed for the TAs (sending a large result costs a run CPU
too, so it is a sign, not a verdict).
"""

from __future__ import annotations

import ast
import statistics
import time
from collections.abc import Callable

import torch

from ..exercise import pace, spec
from ..exercise.cells import strip_magics
from ..exercise.graded import GradedExercise
from ..exercise.verdict import Verdict
from ..reference.inputs import FreshInputs
from ..replay.results import RunResult
from ..replay.run import ReplayOutput
from ..settings import NUMERIC_UNACCOUNTED_SECONDS, JudgeSettings
from ..untrusted.protocol import TRAINING_CPU
from .flags import Flag

NUMERIC = "computed numerically (finite differences), not derived: no credit"
_reference: dict[str, tuple[float, float]] = {}  # assignment -> (seconds, seconds per pace)


def reference_seconds(fresh: FreshInputs, exercise: GradedExercise = spec.NINJA) -> float:
    """What the reference's derived backward costs here (Backprop Ninja's by its step rules, a
    written exercise's by autograd): the fastest of 100 timings after 20 to warm up."""
    return _timed(fresh, exercise)[0]


def run_unit(run: RunResult, fresh: FreshInputs, exercise: GradedExercise = spec.NINJA) -> float:
    """The reference backward's cost at the pace `run` ran at; the judge's own timing where the
    server gave no pace."""
    seconds, per_pace = _timed(fresh, exercise)
    return per_pace * run.pace if run.pace else seconds


def _timed(fresh: FreshInputs, exercise: GradedExercise) -> tuple[float, float]:
    """Once a process and exercise, one thread as in a run, the backward and the pace work in
    turns (about 60 ms): the backward's fastest timing, and the median over ten blocks of the
    ratio of the two fastest in a block (a block is too short for the pace to move)."""
    if exercise.assignment not in _reference:
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            costs, paces = [], []
            for i in range(120):
                started = time.thread_time()
                fresh.backward()
                if i >= 20:
                    costs.append(time.thread_time() - started)
                    paces.append(pace.seconds(1))
        finally:
            torch.set_num_threads(threads)
        blocks = [min(costs[b : b + 10]) / min(paces[b : b + 10]) for b in range(0, 100, 10)]
        _reference[exercise.assignment] = (min(costs), statistics.median(blocks))
    return _reference[exercise.assignment]


def budget(settings: JudgeSettings, unit: float) -> float:
    """CPU seconds an exercise's cells may take, `unit` being the reference backward's."""
    return max(settings.numeric_factor * unit, settings.numeric_floor_seconds)


def over_budget(
    plan: list[dict], fresh: FreshInputs, settings: JudgeSettings, exercise: GradedExercise = spec.NINJA
) -> Callable[[RunResult], bool]:
    """Whether a run's cells cost more than the bound: the replay runs such a run once more."""
    section: list[dict] = []  # parsed at the first run's return, once

    def over(run: RunResult) -> bool:
        section[:] = section or [sections(plan, exercise)]
        limit = budget(settings, run_unit(run, fresh, exercise))
        return bool(costly(run, section[0], limit, settings.train_steps, exercise.training))

    return over


def sections(plan: list[dict], exercise: GradedExercise = spec.NINJA) -> dict[str, set[int]]:
    """Each student cell's exercises: an answer cell's own; a cell the student added, those of
    the later answer cells that read a name it binds (a cell that loops, plots or checks the
    answers with numbers of its own feeds no answer: it is no exercise's cost)."""
    answers = {exercise.answer_cell(ex): ex for ex in exercise.exercises}
    by_label: dict[str, set[int]] = {spec.EX4_FUNCTION: {exercise.training}} if exercise.training else {}
    reads = [
        (i, answers[c.get("grade_id")], _names(c["source"])[1])
        for i, c in enumerate(plan)
        if c["kind"] == "answer" and c.get("grade_id") in answers
    ]
    for i, cell in enumerate(plan):
        if cell["kind"] == "answer" and cell.get("grade_id") in answers:
            by_label[cell["label"]] = {answers[cell["grade_id"]]}
        elif cell["kind"] == "added":
            bound = _names(cell["source"])[0]
            by_label[cell["label"]] = {ex for j, ex, read in reads if j > i and bound & read}
    return by_label


def _names(source: str) -> tuple[set[str], set[str]]:
    """(names the cell binds, names it reads); none for a cell that does not parse."""
    try:
        tree = ast.parse(strip_magics(source))
    except (SyntaxError, ValueError, RecursionError):
        return set(), set()
    bound, read = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.Global):
            bound.update(node.names)
    return bound, read - bound  # an import binds no answer's input; a name a cell binds it does not read


def costly(
    run: RunResult, section: dict[str, set[int]], limit: float, train_steps: int, training: int | None = 4
) -> dict[int, float]:
    """Exercise -> CPU seconds of its student cells in this run (`section`: sections(plan)),
    where over the limit."""
    spent: dict[int, float] = {}
    for label, seconds in run.meta.get("cpu", {}).items():
        for ex in section.get(label, ()):
            spent[ex] = spent.get(ex, 0.0) + seconds
    cpu = run.meta.get("cpu", {}).get(TRAINING_CPU, 0.0)
    if training is not None and cpu > limit * max(train_steps, 1):  # manual_backward, once a step
        spent[training] = max(spent.get(training, 0.0), cpu)
    return {ex: s for ex, s in spent.items() if s > limit}


def unaccounted(run: RunResult, limit: float) -> float:
    """CPU seconds the kernel counted and the run's own count does not explain."""
    if run.cpu is None or not run.meta:
        return 0.0
    missing = run.cpu - sum(run.meta.get("cpu", {}).values())
    return missing if missing > limit else 0.0


def apply_numeric(
    verdicts: dict[str, Verdict],
    out: ReplayOutput,
    plan: list[dict],
    fresh: FreshInputs,
    settings: JudgeSettings,
    unit: float | None = None,
    *,
    exercise: GradedExercise = spec.NINJA,
) -> list[Flag]:
    """Zero (policy "zero") or list (policy "flag") what numeric work produced; `unit`: the
    reference backward's CPU seconds for every run, each run's own (run_unit) when None."""
    section = sections(plan, exercise)  # parsed once for all the runs
    found: dict[int, str] = {}
    flags = []
    for name, run in out.runs.items():
        if run.by:  # not made: its cost is the run's that stands for it
            continue
        limit = budget(settings, run_unit(run, fresh, exercise) if unit is None else unit)
        for ex, seconds in costly(run, section, limit, settings.train_steps, exercise.training).items():
            found.setdefault(
                ex,
                f"exercise {ex}'s cells took {seconds:.2f} CPU s (a derived backward: {limit:.2g} s at most)",
            )
        lost = unaccounted(run, max(limit, NUMERIC_UNACCOUNTED_SECONDS))
        if lost:  # results to send cost the run CPU too: a sign for the TAs, not a verdict
            flags.append(Flag("tampering", f"{lost:.1f} CPU s of run {name} not in its own count", []))
    for ex, evidence in sorted(found.items()):
        ids = [g.grade_id for g in exercise.graded if g.exercise == ex and verdicts[g.grade_id].score > 0]
        if settings.autograd_policy == "zero":
            for gid in ids:
                v = verdicts[gid]
                v.score, v.hint, v.lines, v.problem = 0.0, NUMERIC, [*v.lines[:1], NUMERIC], "numeric"
        if ids:
            allowed = "; no credit" if settings.autograd_policy == "zero" else "; graded as allowed"
            flags.append(Flag("numeric", evidence + allowed, ids))
    return flags
