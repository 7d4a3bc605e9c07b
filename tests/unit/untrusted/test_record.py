"""The record a replay run sends back (grader/untrusted/protocol.py's RunRecord) and the judge's
check of it (grader/replay/results.py) agree: one field list, and what the runner writes passes
through encode_frame (grader/untrusted/server.py) / parse_frame / check_meta unchanged."""

from __future__ import annotations

import json
import signal
import time

import pytest
import torch

from grader.exercise import spec
from grader.replay import results
from grader.replay.plan import EX1, what_is_asked
from grader.replay.tensors import Expect
from grader.untrusted.frames import encode_frame
from grader.untrusted.protocol import MAX_OWN, OWN, RunRecord, value_key
from grader.untrusted.runner import NoIPython, Runner

EX1_CELL = spec.ANSWER_CELLS[1]
EX1_NAMES = [g.name for g in EX1]
FIELDS = set(RunRecord.__annotations__)


def _cell(label, kind, source, grade_id=None):
    return {"label": label, "kind": kind, "grade_id": grade_id, "source": source, "seeded": False}


PLAN = {
    "cells": [
        _cell("setup", "locked", "import torch\nn = 4"),
        _cell(
            EX1_CELL,
            "answer",
            "dlogprobs = torch.ones(2, 3)\ndprobs = not_defined_anywhere\ndh = None\ndW2 = 'text'",
            EX1_CELL,
        ),
        _cell("mine", "added", "extra = 1"),
    ],
    "first_answer": 1,
    "data_dir": ".",
    "train_seed": 1,
    "train_steps": 0,
    "statement_seconds": 5.0,
    "run_tmp_mb": 16,
    **what_is_asked(),
}
INPUTS = {"ex4": {}, "train": {}, "inject": {}}
# by hand: the main run's snapshot of exercise 1's answer cell, all (2, 3)
EXPECTED = {f"{EX1_CELL}/{name}": Expect((2, 3), False, 6) for name in EX1_NAMES}


def _main_run():
    """One "main" run in this process, finished as grader/untrusted/server.py finishes it."""
    checkpoints = []
    runner = Runner(
        PLAN,
        INPUTS,
        checkpoint=lambda record, tensors: checkpoints.append(
            (json.loads(json.dumps(record)), dict(tensors))
        ),
    )
    old = signal.signal(signal.SIGALRM, runner.on_alarm)
    try:
        t0 = time.perf_counter()
        ns = runner.setup({"__name__": "__main__", "get_ipython": NoIPython})
        record, tensors = runner.run(ns, "main")
        record["errors"] = runner.errors
        record["seconds"] = time.perf_counter() - t0
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    return record, tensors, checkpoints


@pytest.fixture(scope="module")
def main_run():
    return _main_run()


def _as_json(record):
    return json.loads(json.dumps(record, default=str))


# ------------------------------------------------------------ one field list
def test_run_record_fields_are_schema_and_values():
    assert set(results.SCHEMA) | {"values"} == FIELDS


def test_runner_writes_only_declared_fields(main_run):
    record, _, _ = main_run
    assert set(record) - FIELDS == set()


def test_the_trivial_plan_exercises_most_fields(main_run):
    record, _, _ = main_run
    assert {"values", "names", "aliases", "n_at", "errors", "ex4_error", "seconds"} <= set(record)


# ------------------------------------------------------------ the round trip
def test_runners_record_passes_check_meta_unchanged(main_run):
    record, tensors, _ = main_run
    result = results.parse_frame(encode_frame(record, tensors), "ok", EXPECTED)
    assert (result.status, result.meta) == ("ok", _as_json(record))


def test_runners_tensors_arrive(main_run):
    record, tensors, _ = main_run
    result = results.parse_frame(encode_frame(record, tensors), "ok", EXPECTED)
    assert (set(result.tensors), result.rejected) == ({f"{EX1_CELL}/dlogprobs"}, {}) and torch.equal(
        result.tensors[f"{EX1_CELL}/dlogprobs"], torch.ones(2, 3)
    )


def test_runners_values_read_back_as_the_judge_sees_them(main_run):
    record, tensors, _ = main_run
    result = results.parse_frame(encode_frame(record, tensors), "ok", EXPECTED)
    missing, none, other = (result.value(f"{EX1_CELL}/{n}") for n in ("dprobs", "dh", "dW2"))
    assert (missing is results.MISSING, none is None, type(other).__name__, other.type_name) == (
        True,
        True,
        "Foreign",
        "str",
    )


def test_the_failed_statement_is_in_the_errors(main_run):
    record, tensors, _ = main_run
    result = results.parse_frame(encode_frame(record, tensors), "ok", EXPECTED)
    assert result.meta["errors"] == [
        {
            "cell": EX1_CELL,
            "line": 2,
            "assigns": ["dprobs"],
            "error": "NameError: name 'not_defined_anywhere' is not defined",
        }
    ]


def test_a_checkpoint_passes_check_meta_unchanged(main_run):
    _, _, checkpoints = main_run
    record, tensors = checkpoints[0]
    result = results.parse_frame(encode_frame(record, tensors), "ok", EXPECTED)
    assert result.meta == record and record["partial"] is True


# ------------------------------------------------------------ the check can refuse
def test_an_undeclared_key_is_dropped(main_run):
    record, tensors, _ = main_run
    result = results.parse_frame(encode_frame(dict(record, verdict="full marks"), tensors), "ok", EXPECTED)
    assert "verdict" not in result.meta


def test_a_value_key_the_judge_does_not_expect_is_dropped(main_run):
    record, tensors, _ = main_run
    only = {f"{EX1_CELL}/dh": EXPECTED[f"{EX1_CELL}/dh"]}
    result = results.parse_frame(encode_frame(record, tensors), "ok", only)
    assert set(result.meta["values"]) == {f"{EX1_CELL}/dh"}


def test_a_field_of_the_wrong_type_costs_the_run(main_run):
    record, tensors, _ = main_run
    result = results.parse_frame(encode_frame(dict(record, seconds="fast"), tensors), "ok", EXPECTED)
    assert (result.meta, result.status) == ({}, "returned an unusable result (seconds is not a duration)")


# ------------------------------------------------------------ a rename, told by its value
RENAME_PLAN = dict(
    PLAN,
    cells=[
        _cell(
            "setup", "locked", "import torch\nn = 4\nlogprobs = torch.zeros(2, 3)\nprobs = torch.zeros(2, 3)"
        ),
        _cell(
            EX1_CELL,
            "answer",
            "mine = torch.ones(2, 3)\n_hidden = torch.ones(2, 3)\nwrong_shape = torch.ones(3, 2)\n"
            "dprobs = torch.ones(2, 3)\nprobs = probs + 1\nglobals()['not a name'] = torch.ones(2, 3)\n"
            "many = [globals().__setitem__(f'x{i}', torch.ones(2, 3)) for i in range(20)]",
            EX1_CELL,
        ),
    ],
)


def _run_plan(plan, run="main"):
    runner = Runner(plan, {"ex4": {}, "train": {}, "inject": {}})
    ns = runner.setup({"__name__": "__main__", "get_ipython": NoIPython})
    return runner.run(ns, run)


def test_the_main_run_returns_the_students_own_names_of_a_missing_gradients_shape():
    record, tensors = _run_plan(RENAME_PLAN)
    # new names only (`probs` is the forward pass's, rebound), no lecture gradient, no _private,
    # no other shape, Python names only, at most MAX_OWN
    assert record["own"] == ["mine"] + [f"x{i}" for i in range(MAX_OWN - 1)]
    assert torch.equal(tensors[value_key(OWN, "0")], torch.ones(2, 3))
    expected = dict(EXPECTED, **{value_key(OWN, str(i)): Expect((), False, 6) for i in range(MAX_OWN)})
    result = results.parse_frame(encode_frame(record, tensors), "ok", expected)
    assert result.meta["own"] == record["own"] and torch.equal(result.value("own/0"), torch.ones(2, 3))
    assert _run_plan(RENAME_PLAN, "local:dlogprobs")[0]["own"][0] == "mine"  # the own-rule run too


def test_an_own_name_that_is_not_a_python_name_costs_the_run(main_run):
    record, tensors, _ = main_run
    result = results.parse_frame(encode_frame(dict(record, own=["a b"]), tensors), "ok", EXPECTED)
    assert result.status == "returned an unusable result (own[0] is not a Python name)"
