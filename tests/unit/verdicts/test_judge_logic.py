"""grader/verdicts/judge.py in-process, on runs built here (no replay server, no nbgrader, no
kernel): what the judge makes of an unusable value, of a forgotten keepdim in exercise 4, and of
its own checks running out of time."""

from __future__ import annotations

import time

from grader.exercise import spec
from grader.exercise.definitions import backprop_ninja as lecture
from grader.replay.client import launch_plain
from grader.replay.results import expected_shapes, parse_frame
from grader.replay.run import ReplayOutput
from grader.settings import JudgeSettings
from grader.untrusted.frames import encode_frame
from grader.verdicts import judge, outcomes

from conftest import JUDGE_SEED
from replay_runs import honest_runs, parse


def test_an_unusable_gradient_is_a_wrong_value_with_the_reason(fresh):
    runs = honest_runs(fresh)
    key = f"{spec.ANSWER_CELLS[1]}/dW1"
    runs["main"].tensors.pop(key)
    runs["main"].rejected[key] = "float16 (12000, 4500)"
    out = ReplayOutput(runs, 0.0)
    v = judge.all_verdicts(outcomes.collect(out, fresh), fresh, JudgeSettings(seed=JUDGE_SEED))
    assert v["ex1_dW1"].score == 0
    assert "hint: the replay returned an unusable value for dW1: float16 (12000, 4500)" in v["ex1_dW1"].lines
    assert v["ex1_dW2"].score == 1 and v["ex1_db1"].score == 1


def test_an_overlong_verdict_costs_only_its_submission(fresh, names_txt, monkeypatch):
    monkeypatch.setattr(judge, "fresh_inputs", lambda ds, s: fresh)
    monkeypatch.setattr(judge, "run_replay", lambda *a, **k: ReplayOutput(honest_runs(fresh), 0.5))
    real = judge.all_verdicts

    def slow(
        out, f, s, *exercise
    ):  # Python that never ends, in an `except Exception` that must not swallow the alarm
        try:
            while True:
                pass
        except Exception:
            return {}

    settings = JudgeSettings(seed=JUDGE_SEED, judge_seconds=0.3)
    monkeypatch.setattr(judge, "all_verdicts", slow)
    t0 = time.perf_counter()
    rec = judge.judge_submission(
        [],
        student="slow",
        settings=settings,
        names_txt=names_txt,
        in_kernel={"ex1_dW1": 1.0},
        launcher=launch_plain,  # run_replay is replaced: nothing starts, in or out of the sandbox
    )
    assert time.perf_counter() - t0 < 5
    assert set(rec.verdicts) == {g.grade_id for g in spec.GRADED}
    assert all(v.score == 0 for v in rec.verdicts.values())
    assert any("took over 0.3 s" in p for p in rec.problems) and not rec.suspicious
    assert rec.to_json()["score"] == 0
    monkeypatch.setattr(judge, "all_verdicts", real)  # the next submission of the batch
    rec = judge.judge_submission(
        [], student="next", settings=settings, names_txt=names_txt, launcher=launch_plain
    )
    assert rec.to_json()["score"] == spec.total_points() and not rec.problems


def test_exercise_4_keepdim_forgotten_still_counts(fresh):
    """compare accepts a shape that differs by size-1 dims only; results.py must let it through."""
    runs = honest_runs(fresh)
    tensors = dict(runs["main"].tensors, **{"ex4/dbngain": fresh.ex4_reference["bngain"].reshape(-1).clone()})
    meta = dict(runs["main"].meta)
    runs["main"] = parse_frame(encode_frame(meta, tensors), "ok", expected_shapes(fresh))
    assert tuple(runs["main"].tensors["ex4/dbngain"].shape) == (lecture.N_HIDDEN_TRAIN,)
    v = judge.all_verdicts(
        outcomes.collect(ReplayOutput(runs, 0.0), fresh), fresh, JudgeSettings(seed=JUDGE_SEED)
    )
    assert v["ex4_dbngain"].score == 1 and "only size-1 dims differ" in v["ex4_dbngain"].lines[0]
    assert sum(x.score for x in v.values()) == spec.total_points()


def test_a_gradient_under_a_name_of_the_students_own_is_named_by_its_value(fresh):
    """dbndiff2 not assigned: `sq` holds its value (said), `other` the same shape but another
    value (not said), in the main run and in the own-rule run, which is read first."""
    runs = honest_runs(fresh)
    key, ref = f"{spec.ANSWER_CELLS[1]}/dbndiff2", fresh.grads["bndiff2"]
    runs["main"].tensors.pop(key)
    runs["main"].meta["values"][key] = {"kind": "missing"}
    runs["local:dbndiff2"] = parse(
        fresh,
        {"values": {"own/0": {"kind": "tensor"}, "own/1": {"kind": "tensor"}}, "own": ["other", "sq"]},
        {"own/0": ref + 1, "own/1": ref.clone()},
    )
    v = judge.all_verdicts(
        outcomes.collect(ReplayOutput(runs, 0.0), fresh), fresh, JudgeSettings(seed=JUDGE_SEED)
    )
    assert v["ex1_dbndiff2"].score == 0
    said = "hint: dbndiff2 is not defined, but `sq` holds exactly its value: name it `dbndiff2`"
    assert said in v["ex1_dbndiff2"].lines
    runs["local:dbndiff2"].meta["own"] = ["other"]  # only a wrong value of that shape: no rename
    v = judge.all_verdicts(
        outcomes.collect(ReplayOutput(runs, 0.0), fresh), fresh, JudgeSettings(seed=JUDGE_SEED)
    )
    assert not any("holds exactly" in line for line in v["ex1_dbndiff2"].lines)
