"""Own-rule runs an earlier run has made unneeded.

A gradient's own-rule run ("local:dX") hands it the correct value of every gradient nearer the
loss, and asks whether the student's rule makes dX right from them. An earlier own-rule run has
answered that already when
- it handed no more: what it handed is some of dX's upstream gradients (so nothing in it could
  be read that dX's own run would not have given),
- every other upstream gradient of dX came out right in it, from the student's own rules, and
- dX came out right in it.
Then dX's rule made dX right from right inputs, and that run stands for dX's (RunResult.by). In a
cascade (one wrong gradient near the loss, all below it wrong as submitted) the first own-rule run
settles every gradient below whose rule is right: one run instead of one a gradient. A gradient
that comes out wrong there, or whose inputs do, still gets its own run: only a right answer is
taken over, so no grade depends on which run decided it.
"""

from __future__ import annotations

from ..exercise.definition import Gradient
from ..exercise.graded import GradedExercise
from ..exercise.verdict import compare_gradient
from ..reference.inputs import FreshInputs
from ..replay.results import RunResult
from ..untrusted.protocol import STATUS_OK, local_gradients, value_key


class StandIns:
    """For one submission: which made run, if any, stands for an own-rule run still to come."""

    def __init__(self, fresh: FreshInputs, exercise: GradedExercise):
        self.fresh, self.exercise = fresh, exercise
        self.by_name = {g.name: g for g in exercise.exercise1}
        self.by_target = {g.target: g for g in exercise.exercise1}
        self._right: dict[tuple[str, str], bool] = {}  # (made run, gradient) -> right in it

    def settled_by(self, run: str, made: dict[str, RunResult]) -> str | None:
        """The first of the `made` runs that stands for every gradient of `run`, or None."""
        wanted = [self.by_name[g] for g in local_gradients(run) if g in self.by_name]
        if not wanted or len(wanted) != len(local_gradients(run)):
            return None
        for name, result in made.items():
            handed = local_gradients(name)
            if not handed or handed[0] not in self.by_name or result.status != STATUS_OK or result.by:
                continue
            given = self.exercise.definition.upstream(self.by_name[handed[0]].target)
            if all(self._answers(name, result, given, g) for g in wanted):
                return name
        return None

    def _answers(self, name: str, result: RunResult, given: set[str], g: Gradient) -> bool:
        needed = self.exercise.definition.upstream(g.target)
        if not given <= needed or any(t not in self.by_target for t in needed - given):
            return False
        return all(self._right_in(name, result, h) for h in [g, *(self.by_target[t] for t in needed - given)])

    def _right_in(self, name: str, result: RunResult, g: Gradient) -> bool:
        key = (name, g.name)
        if key not in self._right:
            value = result.value(value_key(None, g.name))
            self._right[key] = compare_gradient(g, value, self.fresh.grads[g.target], self.exercise).ok
        return self._right[key]
