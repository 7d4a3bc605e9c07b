"""Exercise 4's training point, as the judge decides it: the replay trained the net with the
student's manual_backward (grader/untrusted/runner.py); here its validation loss is compared
with what the kit's own backward reaches from the same start (grader/reference/inputs.py).

Measured, 16 seeds x 100 steps (kit 2.64-2.73): Bessel, 1-h, dC with =, 0.75x gradients end
within +0.06 and pass; 0.5x within +0.17 (8/16 also beat 2.81); 10*param ends at ln 27, +0.56;
zeroing the hidden layer but learning the rest +0.10..+0.20: only the context-free bound
(~2.81 on names.txt) stops it.
"""

from __future__ import annotations

import math

from ..exercise import spec
from ..exercise.definitions.backprop_ninja import network
from ..exercise.verdict import Verdict
from ..reference.inputs import EVAL_EXAMPLES, FreshInputs
from ..replay.results import RunResult
from ..untrusted.protocol import TRAINED, value_key

TRAINING_TOLERANCE = 0.2  # how far above the kit's loss the student's may end


def training_verdict(as_submitted: RunResult, fresh: FreshInputs, ex4_error: str | None) -> Verdict:
    """The point needs learning: the student's trained net must beat every net that ignores its
    input and come close to what the kit's own backward reaches from the same start."""
    check = spec.TRAINING
    params = {k: as_submitted.tensors.get(value_key(TRAINED, k)) for k in spec.PARAMETERS}
    problem = ex4_error or as_submitted.meta.get("train_error") or _unusable(as_submitted)
    if problem or any(p is None for p in params.values()):
        return Verdict(
            check.grade_id, 0.0, check.points, [problem or "training produced no parameters"], hint=problem
        )
    try:
        final = float(network.cross_entropy_forward(params, fresh.eval_X, fresh.eval_Y)["loss"])
    except Exception as e:  # results.py admits the exact shapes only: not expected
        return Verdict(check.grade_id, 0.0, check.points, [f"the trained parameters are unusable: {e}"])
    ref, floor = fresh.reference_train_loss, fresh.context_free_loss
    most = ref + TRAINING_TOLERANCE
    lines = [
        f"trained with your manual_backward: loss {fresh.initial_eval_loss:.2f} -> {final:.2f} on "
        f"{EVAL_EXAMPLES} validation examples; the kit's reference backward reaches {ref:.2f} "
        "from the same start",
        f"to pass: below {floor:.2f} (the best any net that ignores its input can do) and at most "
        f"{most:.2f} ({TRAINING_TOLERANCE:g} above the kit's)",
    ]
    if not math.isfinite(final):
        hint = "the loss became NaN or inf: check the update's direction and the gradients' scale"
    elif final >= floor:
        hint = (
            "the net learned nothing from its input (at most how frequent each character is): "
            "check the update's direction and the gradients"
        )
    elif final > most:
        hint = "the net learns far less than with the kit's backward: check the gradients' scale and sign"
    else:
        hint = None
    return Verdict(check.grade_id, 0.0 if hint else check.points, check.points, lines, hint=hint)


def _unusable(run: RunResult) -> str | None:
    """Why the returned parameters were refused, each reason once (seven views are one line)."""
    why: dict[str, list[str]] = {}
    for k in spec.PARAMETERS:
        key = value_key(TRAINED, k)
        if key in run.rejected:
            why.setdefault(run.rejected[key], []).append(k)
    if not why:
        return None
    parts = [f"{', '.join(ks)} {'is' if len(ks) == 1 else 'are'} {r}" for r, ks in why.items()]
    return f"the replay returned unusable trained parameters: {'; '.join(parts)}"
