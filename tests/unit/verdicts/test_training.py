"""grader/verdicts/training.py in-process: exercise 4's training point needs learning (below
the context-free loss, and close to what the kit's own backward reaches from the same start),
judged on the parameters the replay's training loop (Runner._train) returns."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from grader.exercise import spec
from grader.exercise.definitions.backprop_ninja import network
from grader.exercise.verdict import Verdict
from grader.reference.inputs import TRAINING_TOLERANCE, dataset, fresh_inputs
from grader.replay.results import expected_shapes, parse_frame
from grader.settings import JudgeSettings
from grader.untrusted.frames import encode_frame
from grader.verdicts.training import training_verdict

from conftest import JUDGE_SEED, manual_backward
from replay_runs import trained


def _verdict(fresh, tensors) -> Verdict:
    r = parse_frame(encode_frame({"values": {}}, tensors), "ok", expected_shapes(fresh))
    assert not r.rejected
    return training_verdict(r, fresh, None)


def test_reference_training_is_the_replays_loop(fresh):
    """The judge's own run is Runner._train with the kit's backward: the same loss."""

    def autograd_backward(**kw):
        with torch.enable_grad():
            v = network.cross_entropy_forward(
                {k: kw[k] for k in spec.PARAMETERS}, kw["Xb"], kw["Yb"], track=True
            )
            v["loss"].backward()
        return [v[k].grad for k in spec.PARAMETERS]

    mine = trained(fresh, autograd_backward)
    loss = float(
        network.cross_entropy_forward(
            {k: mine[f"train/{k}"] for k in spec.PARAMETERS}, fresh.eval_X, fresh.eval_Y
        )["loss"]
    )
    assert abs(loss - fresh.reference_train_loss) < 1e-5
    assert fresh.reference_train_loss < fresh.context_free_loss - 0.05 < fresh.initial_eval_loss


def test_the_lectures_backward_gets_the_training_point(fresh):
    v = _verdict(fresh, trained(fresh, manual_backward))
    assert v.score == v.max_score == spec.TRAINING.points and v.hint is None
    assert (
        f"the kit's reference backward reaches {fresh.reference_train_loss:.2f} from the same start"
        in v.lines[0]
    )
    assert v.lines[0].startswith(f"trained with your manual_backward: loss {fresh.initial_eval_loss:.2f} -> ")


def zeroing(**kw):
    """Every parameter to zero in one step (lr 0.1): the loss becomes ln 27 without learning."""
    return [10 * kw[k] for k in spec.PARAMETERS]


def zeroing_but_the_output_layer(**kw):
    """The hidden layer zeroed, the rest learned right: a frequency model, nothing from the input."""
    grads = manual_backward(**kw)
    return [10 * kw[k] if k in ("C", "W1", "b1") else g for k, g in zip(spec.PARAMETERS, grads)]


@pytest.mark.parametrize("seed", [JUDGE_SEED, 7, 99, 2024, 31337])
def test_zeroing_the_parameters_gets_no_training_point(names_txt, seed):
    fresh = fresh_inputs(dataset(names_txt), JudgeSettings(seed=seed))
    for attack in (zeroing, zeroing_but_the_output_layer):
        v = _verdict(fresh, trained(fresh, attack, seed))
        assert v.score == 0, (attack.__name__, v.lines)
        assert v.hint.startswith("the net learned nothing from its input")


def test_learning_far_less_than_the_kit_or_nan_gets_no_point(fresh):
    tensors = trained(fresh, manual_backward)
    # below the context-free bound is not enough when far above what the kit's backward reaches
    faster_kit = dataclasses.replace(fresh, reference_train_loss=fresh.reference_train_loss - 0.25)
    r = parse_frame(encode_frame({}, tensors), "ok", expected_shapes(fresh))
    v = training_verdict(r, faster_kit, None)
    assert v.score == 0 and v.hint.startswith("the net learns far less than with the kit's backward")
    assert (
        f"at most {faster_kit.reference_train_loss + TRAINING_TOLERANCE:.2f} (0.2 above the kit's)"
        in v.lines[1]
    )
    nan = dict(tensors, **{"train/W2": torch.full_like(tensors["train/W2"], float("nan"))})
    assert _verdict(fresh, nan).hint.startswith("the loss became NaN or inf")
    r = parse_frame(
        encode_frame({"train_error": "training raised ValueError: no"}, tensors), "ok", expected_shapes(fresh)
    )
    assert training_verdict(r, fresh, None).lines == ["training raised ValueError: no"]


def test_a_runs_held_out_loss_is_computed_once(fresh):
    """The judge asks a run's training verdict up to three times; its held-out loss (4,000
    examples through the net) is computed once a set of tensors, and anew for other tensors."""
    fresh = dataclasses.replace(fresh)  # a cache of its own
    calls = []
    evaluate = fresh.evaluate
    fresh.evaluate = lambda params: calls.append(params) or evaluate(params)
    r = parse_frame(
        encode_frame({"values": {}}, trained(fresh, manual_backward)), "ok", expected_shapes(fresh)
    )
    first, again = training_verdict(r, fresh, None), training_verdict(r, fresh, None)
    assert first == again and len(calls) == 1
    other = parse_frame(
        encode_frame({"values": {}}, trained(fresh, manual_backward)), "ok", expected_shapes(fresh)
    )
    assert training_verdict(other, fresh, None) == first and len(calls) == 2
