"""results.json as Gradescope reads it: one test per grade id, in the exercise's order, with the
judge's verdict and hint; the total; a clear zero when nothing could be graded. A written
exercise's: its own grade ids, points, title and exercises (no training check, no exercise 4)."""

from __future__ import annotations

import dataclasses
import json

from grader.exercise import spec
from grader.exercise.definitions.gpt_block import GPT_BLOCK
from grader.exercise.graded import GradedExercise
from grader.gradescope import results

from tiny_exercise import TINY

ALL = [g.grade_id for g in spec.GRADED]
NINJA = {"exercise": spec.NINJA}
GPT = GradedExercise.written(GPT_BLOCK)
FLAGS = [{"kind": "autograd", "evidence": "ex1_solution, line 1: reads .grad", "grade_ids": ["ex1_dW1"]}]


def _record():
    verdicts = {
        gid: {"score": 1.0, "max_score": 1.0, "carried": False, "hint": None, "lines": []} for gid in ALL
    }
    verdicts["ex1_dbndiff2"] = {
        "score": 0.0,
        "max_score": 1.0,
        "carried": False,
        "hint": "Bessel's correction",
        "lines": ["dbndiff2 | exact: False", "hint: Bessel's correction"],
    }
    verdicts["ex4_training"]["hint"] = "the loss did not fall"  # a hint that is not among the lines
    return {"student": "42", "seed": 7, "problems": [], "flags": FLAGS, "verdicts": verdicts}


def _scores():
    return {gid: 0.0 if gid == "ex1_dbndiff2" else spec.BY_GRADE_ID[gid].points for gid in ALL}


def test_one_test_per_grade_id_in_spec_order_with_the_gradebook_scores():
    out = results.graded(scores=_scores(), record=_record(), notes=[], visibility="after_due_date", **NINJA)
    assert [t.name for t in out.tests] == ALL
    assert [t.max_score for t in out.tests] == [spec.BY_GRADE_ID[g].points for g in ALL]
    assert {t.name: t.score for t in out.tests} == _scores()
    assert {t.visibility for t in out.tests} == {"after_due_date"}
    assert out.to_json()["score"] == spec.total_points() - 1


def test_outputs_carry_the_verdict_and_the_hint_once():
    out = {
        t.name: t.output for t in results.graded(scores=_scores(), record=_record(), notes=[], **NINJA).tests
    }
    assert out["ex1_dbndiff2"].startswith("FAIL ex1_dbndiff2: 0/1 points")
    assert out["ex1_dbndiff2"].count("Bessel's correction") == 1
    assert out["ex4_training"].endswith("hint: the loss did not fall")
    assert out["ex1_dlogprobs"] == "PASS ex1_dlogprobs: 1/1 points"


def test_a_cell_without_a_verdict_says_so():
    record = _record()
    del record["verdicts"]["ex2_dlogits"]
    out = {t.name: t.output for t in results.graded(scores=_scores(), record=record, notes=[], **NINJA).tests}
    assert "no verdict was recorded" in out["ex2_dlogits"]


def test_summary_notes_and_the_tas_data():
    out = results.graded(
        scores=_scores(), record=_record(), notes=["graded as backprop_ninja.ipynb"], **NINJA
    )
    assert out.output.startswith(f"Backprop Ninja: {spec.total_points() - 1:g}/")
    assert [line.split(":")[0] for line in out.output.splitlines()[1:5]] == [
        f"exercise {ex}" for ex in (1, 2, 3, 4)
    ]
    assert f"{spec.total_points() - 1:g}/{spec.total_points():g} points" in out.output
    assert f"exercise 1: 25/{spec.exercise_points(1):g}" in out.output
    assert "Note: graded as backprop_ninja.ipynb" in out.output
    assert out.extra_data == {"student": "42", "seed": 7, "problems": [], "flags": FLAGS}


def test_not_graded_is_zero_with_the_reason(tmp_path):
    path = tmp_path / "results" / "results.json"
    results.write(results.not_graded("no notebook was submitted", execution_time=2.6), path)
    data = json.loads(path.read_text())
    assert data["score"] == 0.0
    assert data["tests"] == []
    assert data["output"] == "Not graded: no notebook was submitted"
    assert data["execution_time"] == 3


def test_written_json_has_gradescopes_fields(tmp_path):
    path = tmp_path / "results.json"
    results.write(
        results.graded(scores=_scores(), record=_record(), notes=[], execution_time=41.2, **NINJA), path
    )
    data = json.loads(path.read_text())
    assert isinstance(data["score"], float) and data["execution_time"] == 41
    assert data["stdout_visibility"] == "hidden"
    assert set(data["tests"][0]) == {"name", "score", "max_score", "output", "visibility"}


def test_the_flags_go_to_staff_with_their_kinds_once():
    flags = [{"kind": "tampering", "evidence": "ex1_solution, line 2: torch.allclose = f", "grade_ids": ALL}]
    out = results.graded(scores=_scores(), record=_record() | {"flags": flags}, notes=[], **NINJA)
    assert out.extra_data["flags"] == flags and "suspicious" not in out.extra_data


def _written_verdicts(exercise: GradedExercise, wrong: str) -> tuple[dict, dict]:
    """The gradebook's scores and the judge's record of a written exercise: all right but `wrong`."""
    scores = {g.grade_id: 0.0 if g.grade_id == wrong else g.points for g in exercise.graded}
    verdicts = {
        gid: {"score": s, "max_score": 1.0, "carried": False, "hint": None, "lines": []}
        for gid, s in scores.items()
    }
    verdicts[wrong]["hint"] = "transposed"
    return scores, {"student": "7", "seed": 3, "problems": [], "flags": [], "verdicts": verdicts}


def test_a_written_exercise_has_its_own_tests_points_title_and_exercises():
    scores, record = _written_verdicts(GPT, "ex2_dx2")
    out = results.graded(scores=scores, record=record, notes=["a note"], exercise=GPT)
    assert [t.name for t in out.tests] == [g.grade_id for g in GPT.graded]
    assert {t.name: t.max_score for t in out.tests} == {g.grade_id: g.points for g in GPT.graded}
    assert {t.name: t.score for t in out.tests} == scores
    assert out.to_json()["score"] == 79.0
    assert out.output.splitlines() == [
        "A GPT block, backpropagated by hand: 79/81 points",
        "exercise 1: 59/59",
        "exercise 2: 0/2",
        "exercise 3: 2/2",
        "exercise 4: 18/18",
        "Note: a note",
    ]  # its own exercises: exercise 4 is its training exercise
    wrong = next(t for t in out.tests if t.name == "ex2_dx2")
    assert wrong.output == "FAIL ex2_dx2: 0/2 points\n  hint: transposed"


def test_a_written_exercise_without_a_title_is_named_by_its_assignment():
    tiny = GradedExercise.written(dataclasses.replace(TINY, title=""))
    scores, record = _written_verdicts(tiny, "ex1_dW")
    out = results.graded(scores=scores, record=record, notes=[], exercise=tiny)
    assert out.output.splitlines() == ["tiny: 4/5 points", "exercise 1: 4/5"]
