"""A training exercise's point, as the judge decides it: the replay trained the net with the
student's manual_backward (grader/untrusted/runner.py); here its held-out loss is compared
with what the kit's own backward reaches from the same start (Backprop Ninja's exercise 4:
grader/reference/inputs.py; a written exercise's: grader/reference/training.py, which sets the
tolerance to a quarter of the reference run's fall).

Measured, 16 seeds x 100 steps (kit 2.64-2.73): Bessel, 1-h, dC with =, 0.75x gradients end
within +0.06 and pass; 0.5x within +0.17 (8/16 also beat 2.81); 10*param ends at ln 27, +0.56;
zeroing the hidden layer but learning the rest +0.10..+0.20: only the context-free bound
(~2.81 on names.txt) stops it. The GPT block, 3 seeds x 100 steps (4.02-4.18 -> 2.70-2.73 with
autograd's): 0.5x gradients end within +0.09 and pass; dwte negated ends +0.55 over and fails;
all negated diverge; training wte alone, +0.05..+0.12, passes (its gradients' points do not).
"""

from __future__ import annotations

import math

from ..exercise import spec
from ..exercise.graded import GradedExercise
from ..exercise.verdict import Verdict
from ..reference.inputs import EVAL_EXAMPLES, FreshInputs
from ..replay.results import RunResult
from ..untrusted.protocol import TRAINED, value_key


def training_verdict(
    as_submitted: RunResult, fresh: FreshInputs, ex4_error: str | None, exercise: GradedExercise = spec.NINJA
) -> Verdict:
    """The point needs learning: the student's trained net must beat every net that ignores its
    input (a written exercise's: its loss at the start) and come close to what the kit's own
    backward reaches from the same start."""
    check = exercise.checks[0]
    names = exercise.definition.params
    params = {k: as_submitted.tensors.get(value_key(TRAINED, k)) for k in names}
    problem = ex4_error or as_submitted.meta.get("train_error") or _unusable(as_submitted, names)
    if problem or any(p is None for p in params.values()):
        return Verdict(
            check.grade_id, 0.0, check.points, [problem or "training produced no parameters"], hint=problem
        )
    try:
        final = fresh.held_out_loss(params)
    except Exception as e:  # results.py admits the exact shapes only: not expected
        return Verdict(check.grade_id, 0.0, check.points, [f"the trained parameters are unusable: {e}"])
    ref, ninja = fresh.reference_train_loss, math.isfinite(fresh.context_free_loss)
    floor = fresh.context_free_loss if ninja else fresh.initial_eval_loss
    most, tolerance = ref + fresh.train_tolerance, f"{fresh.train_tolerance:.2g}"
    held_out = f"{EVAL_EXAMPLES} validation examples" if ninja else "held-out batches"
    below = "the best any net that ignores its input can do" if ninja else "the loss at the start"
    lines = [
        f"trained with your manual_backward: loss {fresh.initial_eval_loss:.2f} -> {final:.2f} on "
        f"{held_out}; the kit's reference backward reaches {ref:.2f} from the same start",
        f"to pass: below {floor:.2f} ({below}) and at most {most:.2f} ({tolerance} above the kit's)",
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


def _unusable(run: RunResult, names) -> str | None:
    """Why the returned parameters were refused, each reason once (seven views are one line)."""
    why: dict[str, list[str]] = {}
    for k in names:
        key = value_key(TRAINED, k)
        if key in run.rejected:
            why.setdefault(run.rejected[key], []).append(k)
    if not why:
        return None
    parts = [f"{', '.join(ks)} {'is' if len(ks) == 1 else 'are'} {r}" for r, ks in why.items()]
    return f"the replay returned unusable trained parameters: {'; '.join(parts)}"
