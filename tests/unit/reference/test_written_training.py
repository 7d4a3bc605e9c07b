"""A written exercise's training exercise, judge and replay in-process (grader/reference/training.py,
grader/untrusted/training_batches.py, grader/verdicts/training.py), on the GPT block: the
batches are the notebook's batch cell run again, the replay's loop with the instructor's
manual_backward reaches autograd's run, and a wrong direction or shape loses the point."""

from __future__ import annotations

import pytest
import torch

from grader.exercise.definitions.gpt_block import GPT_BLOCK as GPT
from grader.reference.training import draw_batches
from grader.reference.written import fresh_written, setup_values
from grader.replay.plan import training_plan, what_is_asked
from grader.replay.results import expected_shapes, parse_frame
from grader.settings import JudgeSettings
from grader.untrusted.frames import encode_frame
from grader.untrusted.protocol import EX4, batch_key, value_key
from grader.untrusted.runner import Runner
from grader.verdicts.training import training_verdict

from gpt_corpus import MANUAL_BACKWARD, WRITTEN

SETTINGS = JudgeSettings(seed=11)


@pytest.fixture(scope="module")
def folder(names_folder):
    return names_folder


@pytest.fixture(scope="module")
def fresh(folder):
    return fresh_written(WRITTEN, folder, SETTINGS)


def _replayed(fresh, answer: str):
    """The replay's exercise-4 part as the runner does it, through a result frame."""
    plan = {**what_is_asked(WRITTEN), "train_seed": SETTINGS.train_seed, "train_steps": SETTINGS.train_steps}
    plan["training"] = {**training_plan(WRITTEN), "numbers": fresh.numbers}
    ns = {"torch": torch, "F": torch.nn.functional}
    exec(answer, ns)
    meta, tensors = {"values": {}}, {}
    with torch.no_grad():
        Runner(plan, {"ex4": fresh.ex4_inputs, "train": fresh.train})._exercise4(ns, meta, tensors)
    meta["values"].update({k: {"kind": "tensor"} for k in tensors})
    return parse_frame(encode_frame(meta, tensors), "ok", expected_shapes(fresh, WRITTEN))


def test_the_batches_are_the_notebooks_batch_cell_run_again(folder, fresh):
    ns = setup_values(WRITTEN, folder, SETTINGS)
    again = draw_batches(WRITTEN, ns, 3)
    assert torch.equal(fresh.train[batch_key(0, "Xb")], again[0]["Xb"])  # the same stream, the same batches
    assert not torch.equal(again[0]["Xb"], again[1]["Xb"]) and again[0]["Yb"].shape == (32, 8)
    assert fresh.numbers == {"B": 32, "T": 8, "C": 16} and "mask" in fresh.train  # sizes as numbers
    assert fresh.initial_eval_loss > fresh.reference_train_loss + 1.0  # autograd's run learns


def test_the_instructors_manual_backward_trains_as_autograd_does(fresh):
    run = _replayed(fresh, MANUAL_BACKWARD)
    for p in GPT.params:
        torch.testing.assert_close(
            run.tensors[value_key(EX4, "d" + p)], fresh.ex4_reference[p], rtol=1e-4, atol=1e-5
        )
    verdict = training_verdict(run, fresh, None, WRITTEN)
    assert verdict.score == 1.0 and verdict.hint is None
    assert "held-out batches" in verdict.lines[0] and "(the loss at the start)" in verdict.lines[1]


def test_a_wrong_direction_or_shape_costs_the_training_point(fresh):
    negated = _replayed(fresh, MANUAL_BACKWARD.replace("    return [dwte, ", "    return [-dwte, "))
    verdict = training_verdict(negated, fresh, None, WRITTEN)
    assert verdict.score == 0.0 and "learns far less" in verdict.hint
    transposed = _replayed(fresh, MANUAL_BACKWARD.replace("    return [dwte, ", "    return [dwte.T, "))
    verdict = training_verdict(transposed, fresh, None, WRITTEN)
    assert verdict.score == 0.0 and "cannot add it to wte" in verdict.hint
