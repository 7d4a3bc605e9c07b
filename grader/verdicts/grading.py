"""Where a gradient's grade comes from: the student's notebook as submitted, and, when that
fails, their own rule given correct inputs (credit for a carried error). A failure owes a hint
(grader/verdicts/judge.py asks hints.py for it). judge.py decides a whole submission this way.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..exercise.verdict import Verdict, from_comparison
from .outcomes import Outcome

NOTHING = object()


@dataclass
class Decision:
    verdict: Verdict
    explain: object = NOTHING  # the value whose hint explains a failure (NOTHING: none is owed)


def decide(o: Outcome, *, wrong_inputs: list[str] = (), carried_credit: float = 1.0) -> Decision:
    """The replay's verdict, from the outcome's comparisons: as submitted; else the student's
    own rule, when it was run with every upstream gradient correct (credit for a carried error).
    A failure owes a hint on the value that shows the student's rule."""
    gradient, as_is = o.gradient, o.as_is
    if as_is.ok:
        return Decision(from_comparison(gradient, as_is))
    if o.own is not None and o.own.ok:
        why = (
            f"your rule is right; it received a wrong {' and a wrong '.join(f'`{w}`' for w in wrong_inputs)}"
            if wrong_inputs
            else "your rule is right when it is given correct upstream gradients"
        )
        score = round(gradient.points * carried_credit, 6)
        return Decision(
            Verdict(
                gradient.grade_id,
                score,
                gradient.points,
                [as_is.line(), f"{why} (credit for a carried error: {score:g}/{gradient.points:g})"],
                carried=True,
            )
        )
    shows_rule = o.own is not None and o.own.problem != "missing"
    return Decision(from_comparison(gradient, as_is), o.own_rule if shows_rule else o.graded)


def with_hint(verdict: Verdict, text: str | None) -> Verdict:
    """A failed verdict with its hint: the comparison's line, then the hint's."""
    if text:
        verdict.hint = text
        verdict.lines = [verdict.lines[0], f"hint: {text}"]
    return verdict
