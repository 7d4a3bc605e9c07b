"""grader/verdicts/flags.py: what the judge lists for the TAs, each sign with its kind and the
grade ids it bears on; the instructor's locked cells are never scanned."""

from __future__ import annotations

import json

from grader.exercise import spec
from grader.exercise.verdict import Verdict
from grader.verdicts.flags import KERNEL, KERNEL_EVIDENCE, Flag, cell_grade_ids, flags, scan_plan
from grader.verdicts.judge import JudgeRecord
from grader.verdicts.scan import scan_source

EX2 = ["ex2_dlogits"]
ALL = [g.grade_id for g in spec.GRADED]


def _cell(label, kind, source):
    return {"label": label, "kind": kind, "grade_id": None, "source": source, "seeded": False}


def test_locked_cells_are_the_kits_own():
    plan = [
        _cell("forward", "locked", "loss.backward()\ncmp('W1', dW1, W1)\nx = W1.grad\ntorch.arange = f"),
        _cell("ex2_solution", "answer", "dlogits = logits.grad"),
        _cell("your cell after ex2_solution", "added", "import ctypes"),
    ]
    assert [(f.cell, f.what) for f in scan_plan(plan)] == [
        ("ex2_solution", "reads .grad"),
        ("your cell after ex2_solution", "imports ctypes"),
    ]


def test_grade_ids_of_a_cell():
    assert cell_grade_ids("ex2_solution") == EX2
    assert cell_grade_ids("ex4_solution") == [g.grade_id for g in spec.GRADED if g.exercise == 4]
    assert "ex4_training" in cell_grade_ids("ex4_solution")
    assert cell_grade_ids("your cell after ex1_solution") == ALL  # it can reach any answer


def test_serious_findings_become_flags_with_kinds():
    findings = scan_source("ex2_solution", "dlogits = logits.grad") + scan_source(
        "your cell after ex1", "print(W1.grad)\nx = W1.grad\nsys._getframe(1)\ntorch.arange = f"
    )
    out = flags(findings, {}, None)
    assert [(f.kind, f.grade_ids == EX2) for f in out] == [
        ("autograd", True),
        ("introspection", False),
        ("tampering", False),
    ]
    assert out[0].evidence == "ex2_solution, line 1: reads .grad: dlogits = logits.grad"
    assert out[0].reason() == "autograd: " + out[0].evidence
    assert out[2].grade_ids == ALL


def test_a_kernel_pass_that_fails_the_replay_is_a_kernel_flag():
    verdicts = {
        "ex1_dW1": Verdict("ex1_dW1", 0.0, 1.0, problem="mismatch"),
        "ex1_db1": Verdict("ex1_db1", 0.0, 1.0, problem="missing"),  # never reached the replay
        "ex1_dW2": Verdict("ex1_dW2", 1.0, 1.0),
    }
    verdicts["ex4_training"] = Verdict("ex4_training", 0.0, 1.0, problem="mismatch")
    out = flags([], verdicts, {"ex1_dW1": 1.0, "ex1_db1": 1.0, "ex1_dW2": 1.0, "ex4_training": 1.0})
    assert [(f.kind, f.grade_ids) for f in out] == [(KERNEL, ["ex1_dW1"])]  # training is no comparison
    assert "matched autograd in the student's kernel" in out[0].reason()


def test_the_record_keeps_each_flag_once_under_flags():
    flag = Flag("tampering", "ex1_solution, line 1: replaces torch.arange: torch.arange = f", ["ex1_dW1"])
    record = JudgeRecord("s", 1, {}, [], [flag], 0.5, []).to_json()
    assert record["flags"] == [{"kind": "tampering", "evidence": flag.evidence, "grade_ids": ["ex1_dW1"]}]
    assert "suspicious" not in record  # the reason lines are made from the flags where shown


def test_a_flag_read_back_from_the_record_has_its_reason_line():
    flag = Flag(KERNEL, f"ex1_dW1 {KERNEL_EVIDENCE}", ["ex1_dW1"])
    back = Flag.from_json(json.loads(json.dumps(flag.to_json())))
    assert back == flag and back.reason() == f"kernel: ex1_dW1 {KERNEL_EVIDENCE}"


def test_a_name_one_cell_binds_is_the_students_in_the_next():
    plan = [
        _cell("ex1_solution", "answer", "dlogits_backward = probs.clone()"),
        _cell("ex2_solution", "answer", "dlogits = dlogits_backward / n"),
        _cell("ex3_solution", "answer", "dhprebn = nll_loss_backward(g)"),  # bound nowhere: torch's
    ]
    assert [(f.cell, f.kind) for f in scan_plan(plan)] == [("ex3_solution", "autograd")]
