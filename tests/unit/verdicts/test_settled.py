"""grader/verdicts/settled.py: which own-rule runs an earlier run stands for, on runs built here,
and the replay's loop (grader/replay/run.py) making only the others."""

from __future__ import annotations

from dataclasses import replace

import pytest

from grader.exercise import spec
from grader.replay import run as replay_run
from grader.replay.plan import joint_runs, run_order
from grader.replay.results import RunResult
from grader.settings import JudgeSettings
from grader.untrusted.protocol import AS_SUBMITTED, local_gradients, value_key
from grader.verdicts import numeric
from grader.verdicts.settled import StandIns

from conftest import JUDGE_SEED
from replay_runs import parse

EX1 = {g.name: g for g in spec.NINJA.exercise1}


def local_run(fresh, wrong=(), missing=(), status="ok") -> RunResult:
    """An own-rule run that kept every exercise-1 gradient, bare: right but for `wrong` (doubled)
    and `missing`."""
    tensors = {
        g.name: fresh.grads[g.target] * (2 if g.name in wrong else 1)
        for g in EX1.values()
        if g.name not in missing
    }
    return parse(fresh, {"values": {k: {"kind": "tensor"} for k in tensors}}, tensors, status=status)


def test_in_a_cascade_the_first_own_rule_run_stands_for_every_right_gradient_below_it(fresh):
    stand_ins = StandIns(fresh, spec.NINJA)
    made = {"local:dprobs": local_run(fresh)}
    for run in ("local:dcounts_sum_inv", "local:dhprebn", "local:dh+dW2+db2", "local:dC"):
        assert stand_ins.settled_by(run, made) == "local:dprobs"


def test_a_gradient_wrong_there_gets_its_own_run(fresh):
    made = {"local:dprobs": local_run(fresh, wrong={"dbndiff"})}
    stand_ins = StandIns(fresh, spec.NINJA)
    assert stand_ins.settled_by("local:dbndiff", made) is None
    assert stand_ins.settled_by("local:dbndiff2", made) == "local:dprobs"  # upstream of dbndiff


def test_a_gradient_whose_input_was_wrong_there_gets_its_own_run(fresh):
    """dbndiff right, but one of the gradients it reads came out wrong: no answer about its rule."""
    stand_ins = StandIns(fresh, spec.NINJA)
    for bad in ({"dbndiff2"}, {"dhpreact"}):
        assert stand_ins.settled_by("local:dbndiff", {"local:dprobs": local_run(fresh, wrong=bad)}) is None
    missing = {"local:dprobs": local_run(fresh, missing={"dbnvar"})}
    assert stand_ins.settled_by("local:dbndiff", missing) is None


def test_a_run_that_handed_more_than_the_gradients_own_run_stands_for_nothing(fresh):
    """local:dhprebn was handed dbndiff, dbnvar, ...: what dprobs' own run is not. Right values
    there say nothing of dprobs' rule (they could be read back from what was handed)."""
    made = {"local:dhprebn": local_run(fresh)}
    stand_ins = StandIns(fresh, spec.NINJA)
    for run in ("local:dprobs", "local:dbnvar", "local:dh+dW2+db2"):
        assert stand_ins.settled_by(run, made) is None
    assert stand_ins.settled_by("local:dembcat+dW1+db1", made) == "local:dhprebn"


def test_only_a_made_own_rule_run_that_ended_well_stands_for_another(fresh):
    stand_ins = StandIns(fresh, spec.NINJA)
    right = local_run(fresh)
    for made in (
        {AS_SUBMITTED: right},  # handed nothing: a gradient wrong as submitted is wrong there
        {"ex3": right},
        {"local:dprobs": replace(right, status="timed out")},
        {"local:dprobs": replace(right, by="local:dlogits")},  # a stand-in itself
    ):
        assert stand_ins.settled_by("local:dcounts", made) is None, made
    assert stand_ins.settled_by("ex3", {"local:dprobs": right}) is None  # not an own-rule run


def test_the_replay_makes_only_the_runs_nothing_stands_for(fresh, monkeypatch):
    """run_replay on a cascade: dlogprobs wrong as submitted, every rule below it right. One
    own-rule run and exercise 3's are made; every other gradient's run is its stand-in, with its
    own value from the made run; the numeric check reads each made run once."""
    made_runs = []

    def graded(self, run, mode, again, group=False):
        made_runs.append(run)
        result = local_run(fresh) if local_gradients(run) else parse(fresh, {"values": {}}, {})
        result.meta["cpu"], result.cpu = {}, 50.0  # CPU its own count does not explain: a flag a run
        return result

    monkeypatch.setattr(replay_run._Runs, "graded", graded)
    monkeypatch.setattr(replay_run, "server_for", lambda prefix, launcher: None)
    monkeypatch.setattr(replay_run, "write_plan", lambda *a: None)
    monkeypatch.setattr(replay_run._Runs, "one", lambda self, *a, **k: RunResult("skipped"))
    wanted = run_order(spec.NINJA)[1:]
    settings = JudgeSettings(seed=JUDGE_SEED)
    out = replay_run.run_replay(
        [],
        fresh,
        settings,
        exercise=spec.NINJA,
        data={},
        then=lambda main: wanted,
        settled=StandIns(fresh, spec.NINJA).settled_by,
    )
    assert made_runs == [AS_SUBMITTED, "local:dprobs", "ex3"]
    own_rule = [r for r in joint_runs(wanted) if local_gradients(r)]
    for run in own_rule[1:]:
        for g in local_gradients(run):
            result = out.runs[f"local:{g}"]
            assert result.by == "local:dprobs"
            assert set(result.meta["values"]) == {g}  # its own value only, as from its own run
            assert result.value(value_key(None, g)).equal(fresh.grads[EX1[g].target])
    flags = numeric.apply_numeric({}, out, [], fresh, settings, unit=1e-3)
    assert sorted(f.evidence.split(" of run ")[1] for f in flags) == [
        "ex3 not in its own count",
        "local:dprobs not in its own count",
        "main not in its own count",
    ]


@pytest.mark.parametrize("run", ["local:dlogprobs", "local:nothing"])
def test_a_run_it_cannot_read_is_never_settled(fresh, run):
    assert StandIns(fresh, spec.NINJA).settled_by(run, {"local:dprobs": local_run(fresh)}) is None
