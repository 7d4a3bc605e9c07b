"""A graded cell's verdict: its score and the lines the student reads. The student's kernel
(grader/untrusted/in_kernel.py) and the judge (grader/verdicts/) both speak it."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field

import torch

from . import spec
from .cells import CONTINUED, TEXT_WIDTH
from .compare import Comparison, compare
from .graded import GradedExercise

_WHOLE = {"break_long_words": False, "break_on_hyphens": False}  # names and numbers stay whole


@dataclass
class Verdict:
    grade_id: str
    score: float
    max_score: float
    lines: list[str] = field(default_factory=list)
    hint: str | None = None
    carried: bool = False  # credited for a right rule that received a wrong input
    problem: str | None = None  # the comparison's: missing, shape, mismatch, ...

    def text(self) -> str:
        """The cell's output: the mark, then each line wrapped at TEXT_WIDTH (a notebook shows
        output as it is: a hint quoting an error ran past the formgrader's right edge), its
        continuation indented under it."""
        mark = "PASS" if self.score == self.max_score else "FAIL"
        wrapped = [
            textwrap.fill(line, TEXT_WIDTH, initial_indent="  ", subsequent_indent=CONTINUED, **_WHOLE)
            for line in self.lines
        ]
        return "\n".join([f"{mark} {self.grade_id}: {self.score:g}/{self.max_score:g} points", *wrapped])


def gradient_verdict(gradient: spec.Gradient, value, reference: torch.Tensor) -> Verdict:
    return from_comparison(gradient, compare_gradient(gradient, value, reference))


def compare_gradient(
    gradient: spec.Gradient, value, reference: torch.Tensor, exercise: GradedExercise = spec.NINJA
) -> Comparison:
    """`compare` with the gradient's own allowance: zeros are right where the truth is zero."""
    return compare(gradient.name, value, reference, zero_ok_reason=exercise.zero_gradients.get(gradient.name))


def from_comparison(gradient: spec.Gradient, cmp: Comparison) -> Verdict:
    lines = [cmp.line()]
    if not cmp.ok and cmp.problem != "mismatch":
        lines.append(cmp.message())
    return Verdict(
        gradient.grade_id, gradient.points if cmp.ok else 0.0, gradient.points, lines, problem=cmp.problem
    )
