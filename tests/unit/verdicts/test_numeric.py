"""grader/verdicts/numeric.py on runs built here: an exercise whose cells cost far more than a
derived backward computed numerically (no credit, or listed under "flag"); honest cells, the
lecture's loops' cost included, are well inside; a run whose own CPU count falls short of the
kernel's by more than the allowance changed it. Costs are in UNIT, the reference backward's
CPU seconds (measured in the judge's process; fixed here), as the corpora measured them."""

from __future__ import annotations

from dataclasses import replace

import torch

from grader.exercise import spec
from grader.replay.results import RunResult
from grader.replay.run import ReplayOutput
from grader.settings import NUMERIC_UNACCOUNTED_SECONDS, JudgeSettings
from grader.verdicts import judge, numeric, outcomes
from grader.verdicts.numeric import (
    NUMERIC,
    apply_numeric,
    budget,
    costly,
    reference_seconds,
    run_unit,
    sections,
)

from conftest import JUDGE_SEED
from replay_runs import honest_runs


def _cell(label: str, kind: str, source: str, grade_id: str | None = None) -> dict:
    return {"label": label, "kind": kind, "grade_id": grade_id, "source": source}


def _answer(ex: int, source: str) -> dict:
    return _cell(spec.ANSWER_CELLS[ex], "answer", source, spec.ANSWER_CELLS[ex])


PLAN = [
    _cell("forward", "locked", "loss = 1", "forward"),
    _cell("your cell after forward", "added", "_fd = {'W1': 0}"),
    _answer(1, "dW1 = _fd['W1']"),
    _cell("your cell after ex1_solution", "added", "while True:\n    x = 1"),
    _answer(2, "dlogits = 0"),
    _answer(3, "dhprebn = 0"),
    _answer(4, "def manual_backward(): 0"),
]
UNIT = 0.00017  # the reference backward here: the fastest of its timings
# the costliest honest answer of both corpora, in UNIT (hint_scatter_sign: 37)
HONEST = {
    "forward": 6 * UNIT,
    "ex1_solution": 37 * UNIT,
    "ex2_solution": 7 * UNIT,
    "manual_backward": 4 * UNIT,
}


def _with_cpu(run: RunResult, cpu: dict, kernel: float | None = None) -> RunResult:
    kernel = sum(cpu.values()) + 0.1 if kernel is None else kernel
    return replace(run, meta=dict(run.meta, cpu=dict(cpu)), cpu=kernel)


def _graded(fresh, main_cpu: dict, policy="zero", kernel=None):
    runs = honest_runs(fresh)
    runs["main"] = _with_cpu(runs["main"], main_cpu, kernel)
    out = ReplayOutput(runs, 1.0)
    settings = JudgeSettings(seed=JUDGE_SEED, autograd_policy=policy)
    verdicts = judge.all_verdicts(outcomes.collect(out, fresh), fresh, settings)
    return verdicts, apply_numeric(verdicts, out, PLAN, fresh, settings, unit=UNIT)


def test_an_added_cell_counts_with_the_answers_that_read_what_it_binds():
    assert sections(PLAN)["your cell after forward"] == {1}  # dW1 = _fd['W1']
    assert sections(PLAN)["your cell after ex1_solution"] == set()  # feeds no answer: a loop, a plot
    assert sections(PLAN)[spec.EX4_FUNCTION] == {4} and "forward" not in sections(PLAN)


def test_the_budget_is_a_multiple_of_the_reference_backward_and_never_under_the_floor():
    settings = JudgeSettings(seed=JUDGE_SEED)
    assert budget(settings, UNIT) == settings.numeric_factor * UNIT
    assert budget(settings, 1e-6) == settings.numeric_floor_seconds


def test_the_unit_is_measured_once_a_process_and_to_the_nanosecond(fresh):
    unit = reference_seconds(fresh)
    assert 0 < unit < 0.05 and unit != round(unit, 3)  # not a clock tick's multiple
    assert reference_seconds(fresh) == unit


def test_the_backward_is_timed_beside_the_pace_work_with_one_thread(fresh):
    threads = torch.get_num_threads()
    numeric._reference.pop(spec.ASSIGNMENT, None)
    seconds, per_pace = numeric._timed(fresh, spec.NINJA)
    assert torch.get_num_threads() == threads  # given back
    # the backward does several times the pace work's ops: their ratio, not 1 or a clock tick's
    assert 0.5 < per_pace < 20 and seconds == reference_seconds(fresh)


def test_a_run_is_judged_at_the_pace_it_ran_at(fresh, monkeypatch):
    """The same cells, at a pace twice as slow, are half as many units: the bound moves with
    the run's pace; a run without one is judged by the judge's own timing."""
    monkeypatch.setitem(numeric._reference, spec.ASSIGNMENT, (UNIT, 2.0))
    main = _with_cpu(honest_runs(fresh)["main"], dict(HONEST, ex1_solution=150 * UNIT))
    fast, slow = replace(main, pace=UNIT / 2), replace(main, pace=UNIT)
    assert run_unit(fast, fresh) == UNIT and run_unit(slow, fresh) == 2 * UNIT
    assert run_unit(replace(main, pace=None), fresh) == UNIT
    settings = JudgeSettings(seed=JUDGE_SEED)
    for run, flagged in ((fast, ["numeric"]), (slow, [])):
        runs = dict(honest_runs(fresh), main=run)
        out = ReplayOutput(runs, 1.0)
        verdicts = judge.all_verdicts(outcomes.collect(out, fresh), fresh, settings)
        assert [f.kind for f in apply_numeric(verdicts, out, PLAN, fresh, settings)] == flagged


def test_honest_cells_cost_nothing(fresh):
    verdicts, flags = _graded(fresh, dict(HONEST, training=0.4))
    assert flags == [] and sum(v.score for v in verdicts.values()) == spec.total_points()


def test_finite_differences_in_exercise_1_earn_nothing_there_only(fresh):
    """d05's cost: central differences over 155 elements, 310 forward passes, 177 UNIT or more."""
    verdicts, flags = _graded(fresh, dict(HONEST, ex1_solution=177 * UNIT))
    ex1 = [g.grade_id for g in spec.GRADED if g.exercise == 1]
    assert all(verdicts[g].score == 0 and verdicts[g].hint == NUMERIC for g in ex1)
    assert sum(v.score for v in verdicts.values()) == spec.total_points() - len(ex1)
    assert [f.kind for f in flags] == ["numeric"] and set(flags[0].grade_ids) == set(ex1)
    assert "exercise 1's cells took 0.03 CPU s (a derived backward: 0.017 s at most)" in flags[0].evidence


def test_the_bound_keeps_its_margins():
    """Honest answers at 37 UNIT at most; d07's own burn 44 to 71 and d05 126 to 268, each run at
    its own pace on a busy 2-core virtual machine (numeric.py): between the worst of each."""
    factor = JudgeSettings(seed=JUDGE_SEED).numeric_factor
    assert factor > 2 * 37 and factor > 1.3 * 71 and 1.25 * factor < 126


def test_an_added_cell_doing_the_work_counts_too(fresh):
    _, flags = _graded(fresh, dict(HONEST, **{"your cell after forward": 200 * UNIT}))
    assert [f.kind for f in flags] == ["numeric"]


def test_an_added_cell_that_feeds_no_answer_costs_nothing(fresh):
    """A cell that loops to its statement limit, or checks the answers numerically, computes no
    answer: the hostile corpus's loops and bombs keep the honest answers' points."""
    _, flags = _graded(fresh, dict(HONEST, **{"your cell after ex1_solution": 10.0}))
    assert flags == []


def test_under_flag_the_gradients_keep_their_points_and_are_listed(fresh):
    verdicts, flags = _graded(fresh, dict(HONEST, ex2_solution=200 * UNIT), policy="flag")
    assert verdicts["ex2_dlogits"].score == verdicts["ex2_dlogits"].max_score
    assert flags[0].grade_ids == ["ex2_dlogits"] and flags[0].evidence.endswith("graded as allowed")


def test_a_run_whose_own_count_misses_much_cpu_is_listed_not_zeroed(fresh):
    """Sending a large result costs a run CPU outside its cells too: a sign for the TAs."""
    verdicts, flags = _graded(fresh, HONEST, kernel=sum(HONEST.values()) + NUMERIC_UNACCOUNTED_SECONDS + 0.3)
    assert sum(v.score for v in verdicts.values()) == spec.total_points()
    assert [f.kind for f in flags] == ["tampering"] and "not in its own count" in flags[0].evidence


def test_training_is_bounded_per_step(fresh):
    runs = honest_runs(fresh)
    settings = JudgeSettings(seed=JUDGE_SEED)
    limit = 0.05
    cheap = _with_cpu(runs["main"], {"training": limit * settings.train_steps * 0.5})
    dear = _with_cpu(runs["main"], {"training": limit * settings.train_steps * 2})
    assert costly(cheap, sections(PLAN), limit, settings.train_steps) == {}
    assert list(costly(dear, sections(PLAN), limit, settings.train_steps)) == [4]
