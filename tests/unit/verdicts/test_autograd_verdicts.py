"""grader/verdicts/autograd.py on runs built here: a gradient right only when autograd could
run gets no credit ("zero") or is listed ("flag"); a checking cell that used autograd and
changed nothing costs nothing, with or without its watched run (outcomes.wrong_when_blocked);
a run stopped for working around the check loses what came after."""

from __future__ import annotations

from grader.exercise import spec
from grader.replay.results import RunResult
from grader.replay.run import ReplayOutput
from grader.settings import JudgeSettings
from grader.untrusted.protocol import BLOCK, OPEN, TRAINED
from grader.verdicts import judge, outcomes
from grader.verdicts.autograd import NO_CREDIT, apply_policy, evidence, made_by_autograd

from conftest import JUDGE_SEED
from replay_runs import honest_runs

KEY = f"{spec.ANSWER_CELLS[1]}/dW1"
CALL = {"kind": "call", "what": "torch.autograd.grad", "cell": "ex1_solution", "line": 12}


def _without(run: RunResult, *keys: str, status: str | None = None, events=()) -> RunResult:
    meta = dict(run.meta, values=dict(run.meta["values"]), autograd=list(events))
    tensors = dict(run.tensors)
    for k in keys:
        meta["values"][k] = {"kind": "missing"}
        tensors.pop(k, None)
    return RunResult(status or run.status, meta, tensors)


def _graded(fresh, out: ReplayOutput, policy: str):
    found = outcomes.collect(out, fresh)
    verdicts = judge.all_verdicts(found, fresh, JudgeSettings(seed=JUDGE_SEED))
    return verdicts, apply_policy(verdicts, found, out, policy)


def test_a_gradient_only_autograd_made_gets_no_credit_and_a_flag(fresh):
    runs = honest_runs(fresh)
    watched = _without(runs["main"], events=[CALL])
    runs["main"] = _without(runs["main"], KEY, events=[CALL])
    out = ReplayOutput(runs, 1.0, mode=BLOCK, counterpart=watched)
    assert made_by_autograd(outcomes.collect(out, fresh)) == ["ex1_dW1"]
    verdicts, flags = _graded(fresh, out, "zero")
    assert verdicts["ex1_dW1"].score == 0 and verdicts["ex1_dW1"].hint == NO_CREDIT
    assert verdicts["ex1_dW1"].problem == "autograd"
    assert sum(v.score for v in verdicts.values()) == spec.total_points() - 1
    assert [(f.kind, f.grade_ids) for f in flags] == [("autograd", ["ex1_dW1"])]
    assert "torch.autograd.grad (ex1_solution, line 12)" in flags[0].evidence


def test_under_flag_the_grade_follows_autograd_and_the_gradient_is_listed(fresh):
    runs = honest_runs(fresh)
    blocked = _without(runs["main"], KEY, events=[CALL])
    runs["main"] = _without(runs["main"], events=[CALL])
    out = ReplayOutput(runs, 1.0, mode=OPEN, counterpart=blocked)
    verdicts, flags = _graded(fresh, out, "flag")
    assert verdicts["ex1_dW1"].score == 1
    assert [(f.kind, f.grade_ids) for f in flags] == [("autograd", ["ex1_dW1"])]
    assert "graded as allowed" in flags[0].evidence


def test_autograd_that_changed_no_gradient_costs_nothing(fresh):
    runs = honest_runs(fresh)
    watched = _without(runs["main"], events=[CALL])
    runs["main"] = _without(runs["main"], events=[CALL])
    for policy, mode in (("zero", BLOCK), ("flag", OPEN)):
        out = ReplayOutput(dict(runs), 1.0, mode=mode, counterpart=watched)
        verdicts, flags = _graded(fresh, out, policy)
        assert sum(v.score for v in verdicts.values()) == spec.total_points() and flags == []


def _with_ex3(run: RunResult, fresh) -> RunResult:
    """The main run as the runner sends it: exercise 3's cell kept too (honest_runs has not)."""
    key = f"{spec.ANSWER_CELLS[3]}/dhprebn"
    meta = dict(run.meta, values=dict(run.meta["values"], **{key: {"kind": "tensor"}}))
    return RunResult(run.status, meta, dict(run.tensors, **{key: fresh.grads["hprebn"]}))


def test_only_a_blocked_run_with_something_wrong_needs_its_watched_run(fresh):
    main = _with_ex3(honest_runs(fresh)["main"], fresh)
    assert outcomes.wrong_when_blocked(main, fresh) is False
    assert outcomes.wrong_when_blocked(_without(main, KEY), fresh) is True
    assert outcomes.wrong_when_blocked(_without(main, f"{spec.ANSWER_CELLS[3]}/dhprebn"), fresh) is True
    trained = [k for k in main.tensors if k.startswith(f"{TRAINED}/")]
    assert trained and outcomes.wrong_when_blocked(_without(main, *trained), fresh) is True


def test_without_its_watched_run_a_right_notebook_is_graded_and_flagged_the_same(fresh):
    runs = honest_runs(fresh)
    runs["main"] = _with_ex3(_without(runs["main"], events=[CALL]), fresh)
    watched = runs["main"]
    with_it = _graded(fresh, ReplayOutput(dict(runs), 1.0, mode=BLOCK, counterpart=watched), "zero")
    without = _graded(fresh, ReplayOutput(dict(runs), 1.0, mode=BLOCK, counterpart=None), "zero")
    assert {k: (v.score, v.hint, v.lines) for k, v in with_it[0].items()} == {
        k: (v.score, v.hint, v.lines) for k, v in without[0].items()
    }
    assert with_it[1] == without[1] == []
    assert sum(v.score for v in without[0].values()) == spec.total_points()


def test_a_sign_of_getting_under_the_check_is_listed_and_costs_nothing_by_itself(fresh):
    """Grad mode switched on by a route the entry points do not cover gets no graph (the
    dispatcher's autograd kernels are off): the run goes on, its honest values count, and
    the TAs see where it tried."""
    runs = honest_runs(fresh)
    sign = {"kind": "bypass", "what": "grad mode switched on", "cell": "ex1_solution", "line": 30}
    runs["main"] = _without(runs["main"], events=[sign])
    out = ReplayOutput(runs, 1.0, mode=BLOCK, counterpart=_without(runs["main"], events=[]))
    assert made_by_autograd(outcomes.collect(out, fresh)) == []
    verdicts, flags = _graded(fresh, out, "zero")
    assert sum(v.score for v in verdicts.values()) == spec.total_points()
    assert [f.kind for f in flags] == ["tampering"] and flags[0].grade_ids == []
    assert "grad mode switched on (ex1_solution, line 30)" in flags[0].evidence


def test_evidence_names_each_route_once_with_its_lines():
    run = RunResult("ok", {"autograd": [CALL, dict(CALL, line=14), dict(CALL, what="Tensor.backward")]})
    said = evidence([run, run], ("call",))
    assert said == "torch.autograd.grad (ex1_solution, lines 12, 14); Tensor.backward (ex1_solution, line 12)"


def test_a_watched_run_trains_only_where_the_blocked_one_lost_the_training_point(fresh):
    """Its training can explain the training point only: where the blocked run kept it, autograd
    made nothing of it, and grades and flags are the same without the watched run's training."""
    main = _with_ex3(honest_runs(fresh)["main"], fresh)
    trained = [k for k in main.tensors if k.startswith(f"{TRAINED}/")]
    assert outcomes.watch_training(_without(main, KEY), fresh) is False
    assert outcomes.watch_training(_without(main, *trained), fresh) is True
    runs = honest_runs(fresh)
    runs["main"] = _with_ex3(_without(runs["main"], KEY, events=[CALL]), fresh)
    watched = _without(_with_ex3(honest_runs(fresh)["main"], fresh), events=[CALL])
    untrained = _without(watched, *trained)
    with_it = _graded(fresh, ReplayOutput(dict(runs), 1.0, mode=BLOCK, counterpart=watched), "zero")
    without = _graded(fresh, ReplayOutput(dict(runs), 1.0, mode=BLOCK, counterpart=untrained), "zero")
    assert {k: (v.score, v.hint, v.lines) for k, v in with_it[0].items()} == {
        k: (v.score, v.hint, v.lines) for k, v in without[0].items()
    }
    assert with_it[1] == without[1] and [f.grade_ids for f in without[1]] == [["ex1_dW1"]]
