"""grader/verdicts/numeric.py on runs built here: an exercise whose cells cost far more than a
forward pass computed numerically (no credit, or listed under "flag"); honest cells, the
lecture's loops' cost included, are well inside; a run whose own CPU count falls short of the
kernel's by more than the allowance changed it."""

from __future__ import annotations

from dataclasses import replace

from grader.exercise import spec
from grader.replay.results import RunResult
from grader.replay.run import ReplayOutput
from grader.settings import NUMERIC_UNACCOUNTED_SECONDS, JudgeSettings
from grader.verdicts import judge, outcomes
from grader.verdicts.numeric import NUMERIC, apply_numeric, budget, costly, sections

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
HONEST = {"forward": 0.003, "ex1_solution": 0.005, "ex2_solution": 0.001, "manual_backward": 0.003}


def _with_cpu(run: RunResult, cpu: dict, kernel: float | None = None) -> RunResult:
    kernel = sum(cpu.values()) + 0.1 if kernel is None else kernel
    return replace(run, meta=dict(run.meta, cpu=dict(cpu)), cpu=kernel)


def _graded(fresh, main_cpu: dict, policy="zero", kernel=None):
    runs = honest_runs(fresh)
    runs["main"] = _with_cpu(runs["main"], main_cpu, kernel)
    out = ReplayOutput(runs, 1.0)
    settings = JudgeSettings(seed=JUDGE_SEED, autograd_policy=policy)
    verdicts = judge.all_verdicts(outcomes.collect(out, fresh), fresh, settings)
    return verdicts, apply_numeric(verdicts, out, PLAN, fresh, settings)


def test_an_added_cell_counts_with_the_answers_that_read_what_it_binds():
    assert sections(PLAN)["your cell after forward"] == {1}  # dW1 = _fd['W1']
    assert sections(PLAN)["your cell after ex1_solution"] == set()  # feeds no answer: a loop, a plot
    assert sections(PLAN)[spec.EX4_FUNCTION] == {4} and "forward" not in sections(PLAN)


def test_the_budget_is_a_multiple_of_a_forward_pass_and_never_under_the_floor(fresh):
    settings = JudgeSettings(seed=JUDGE_SEED)
    runs = {"main": _with_cpu(honest_runs(fresh)["main"], {"forward": 0.01})}
    assert budget(settings, fresh, ReplayOutput(runs, 1.0)) == settings.numeric_factor * 0.01
    runs = {"main": _with_cpu(honest_runs(fresh)["main"], {"forward": 0.0001})}
    assert budget(settings, fresh, ReplayOutput(runs, 1.0)) == settings.numeric_floor_seconds


def test_honest_cells_cost_nothing(fresh):
    verdicts, flags = _graded(fresh, dict(HONEST, training=0.4))
    assert flags == [] and sum(v.score for v in verdicts.values()) == spec.total_points()


def test_finite_differences_in_exercise_1_earn_nothing_there_only(fresh):
    """d05's cost: 0.11 CPU s for central differences over 155 elements, 36 forward passes."""
    verdicts, flags = _graded(fresh, dict(HONEST, ex1_solution=0.107))
    ex1 = [g.grade_id for g in spec.GRADED if g.exercise == 1]
    assert all(verdicts[g].score == 0 and verdicts[g].hint == NUMERIC for g in ex1)
    assert sum(v.score for v in verdicts.values()) == spec.total_points() - len(ex1)
    assert [f.kind for f in flags] == ["numeric"] and set(flags[0].grade_ids) == set(ex1)
    assert "exercise 1's cells took 0.11 CPU s" in flags[0].evidence


def test_an_added_cell_doing_the_work_counts_too(fresh):
    _, flags = _graded(fresh, dict(HONEST, **{"your cell after forward": 0.5}))
    assert [f.kind for f in flags] == ["numeric"]


def test_an_added_cell_that_feeds_no_answer_costs_nothing(fresh):
    """A cell that loops to its statement limit, or checks the answers numerically, computes no
    answer: the hostile corpus's loops and bombs keep the honest answers' points."""
    _, flags = _graded(fresh, dict(HONEST, **{"your cell after ex1_solution": 10.0}))
    assert flags == []


def test_under_flag_the_gradients_keep_their_points_and_are_listed(fresh):
    verdicts, flags = _graded(fresh, dict(HONEST, ex2_solution=2.0), policy="flag")
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
