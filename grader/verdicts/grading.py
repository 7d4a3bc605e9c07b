"""Where a gradient's grade comes from: the student's notebook as submitted, and, when that
fails, their own rule given correct inputs (credit for a carried error), with a hint for
each failure. grader/verdicts/judge.py collects these for a whole submission.
"""

from __future__ import annotations

import torch

from ..exercise import spec
from ..exercise.verdict import Verdict, compare_gradient, from_comparison


def decide(
    gradient: spec.Gradient,
    *,
    as_submitted,
    reference: torch.Tensor,
    with_correct_inputs=None,
    wrong_inputs: list[str] = (),
    carried_credit: float = 1.0,
    hint=None,
) -> Verdict:
    """The replay's verdict. `as_submitted` is what the student's notebook computed;
    `with_correct_inputs` what their code computed when every upstream gradient was replaced
    by the correct one. `hint` is called only for a failure, with the value that shows the
    student's rule."""
    as_is = compare_gradient(gradient, as_submitted, reference)
    if as_is.ok:
        return from_comparison(gradient, as_is)
    alone = (
        compare_gradient(gradient, with_correct_inputs, reference)
        if with_correct_inputs is not None
        else None
    )
    if alone is not None and alone.ok:
        why = (
            f"your rule is right; it received a wrong {' and a wrong '.join(f'`{w}`' for w in wrong_inputs)}"
            if wrong_inputs
            else "your rule is right when it is given correct upstream gradients"
        )
        score = round(gradient.points * carried_credit, 6)
        return Verdict(
            gradient.grade_id,
            score,
            gradient.points,
            [as_is.line(), f"{why} (credit for a carried error: {score:g}/{gradient.points:g})"],
            carried=True,
        )
    shows_rule = with_correct_inputs is not None and alone.problem != "missing"
    text = hint(with_correct_inputs if shows_rule else as_submitted) if hint else None
    verdict = from_comparison(gradient, as_is)
    if text:
        verdict.hint = text
        verdict.lines = [as_is.line(), f"hint: {text}"]
    return verdict
