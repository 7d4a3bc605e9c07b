"""Compare a student's gradient with the reference: the one place a match is decided. The
values that are not tensors (MISSING, Foreign, Unusable) are defined here, once.

Pure functions on values, so the same code judges in the student's kernel today and in
a separate process on fresh inputs later.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

# allclose-level: float32 backprop in another order differs by ~1e-8; real mistakes
# (Bessel's n/(n-1) is 3%) are far above this.
RTOL = 1e-4
ATOL = 1e-6


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


MISSING = _Missing()


class Foreign:
    """Stands for a value that is not a tensor, known only by its type's name."""

    def __init__(self, type_name: str):
        self.type_name = type_name


class Unusable(Foreign):
    """A tensor the replay returned that the judge will not compute with (grader/replay/results.py)."""

    def __init__(self, name: str, reason: str):
        super().__init__(f"an unusable tensor: {reason}")
        self.message = f"the replay returned an unusable value for {name}: {reason}"


@dataclass
class Comparison:
    name: str
    ok: bool
    problem: str | None = None  # missing/none/not_tensor/unusable/shape/nonfinite/mismatch
    exact: bool = False
    approx: bool = False
    maxdiff: float | None = None
    shape: tuple | None = None  # the student's
    expected_shape: tuple | None = None
    notes: tuple[str, ...] = ()

    def line(self) -> str:
        """One line in the style of the lecture's cmp()."""
        head = f"{self.name:15s} | "
        if self.problem in (None, "mismatch"):
            text = (
                f"exact: {str(self.exact):5s} | approximate: {str(self.approx):5s} | "
                f"maxdiff: {self.maxdiff:.3g} | shape {_fmt(self.shape)}"
            )
        else:
            text = self.message()
        if self.notes:
            text += " (" + "; ".join(self.notes) + ")"
        return head + text

    def message(self) -> str:
        exp, p = _fmt(self.expected_shape), self.problem
        if p == "missing":
            return f"{self.name} is not defined"
        if p == "none":
            return f"{self.name} is None; assign it a tensor of shape {exp}"
        if p == "not_tensor":
            return f"{self.name} is not a torch tensor"
        if p == "unusable":
            return f"{self.name} could not be used"
        if p == "shape":
            return f"wrong shape {_fmt(self.shape)}, expected {exp}"
        if p == "nonfinite":
            return f"{self.name} contains NaN or inf"
        if p == "mismatch":
            return f"values differ from the reference (maxdiff {self.maxdiff:.3g})"
        return "matches the reference"


def _fmt(shape) -> str:
    return "?" if shape is None else str(tuple(shape))


def as_reference_shape(value: torch.Tensor, expected: torch.Size) -> torch.Tensor | None:
    """The student's tensor in the reference's shape if it differs only by size-1 dims."""
    if tuple(value.shape) == tuple(expected):
        return value
    squeeze = [s for s in value.shape if s != 1]
    if squeeze == [s for s in expected if s != 1]:
        return value.reshape(expected)
    return None


def compare(name: str, value, reference: torch.Tensor, *, zero_ok_reason: str | None = None) -> Comparison:
    exp = tuple(reference.shape)
    if value is MISSING:
        return Comparison(name, False, "missing", expected_shape=exp)
    if value is None:
        return Comparison(name, False, "none", expected_shape=exp)
    if not isinstance(value, torch.Tensor):
        problem = "unusable" if isinstance(value, Unusable) else "not_tensor"
        return Comparison(
            name,
            False,
            problem,
            expected_shape=exp,
            notes=(f"got {getattr(value, 'type_name', type(value).__name__)}",),
        )
    shape = tuple(value.shape)
    fitted = as_reference_shape(value, reference.shape)
    if fitted is None:
        return Comparison(name, False, "shape", shape=shape, expected_shape=exp)
    notes = []
    if shape != exp:
        notes.append(f"shape {_fmt(shape)} accepted for {_fmt(exp)}: only size-1 dims differ")
    if fitted.is_complex():
        return Comparison(
            name, False, "not_tensor", shape=shape, expected_shape=exp, notes=("got a complex tensor",)
        )
    v = fitted.detach().to(torch.float64)
    if not bool(torch.isfinite(v).all()):
        return Comparison(name, False, "nonfinite", shape=shape, expected_shape=exp)
    r = reference.detach().to(torch.float64)
    exact = bool(torch.equal(fitted.detach().to(reference.dtype), reference.detach()))
    maxdiff = float((v - r).abs().max()) if v.numel() else 0.0
    approx = bool(torch.allclose(v, r, rtol=RTOL, atol=ATOL))
    if zero_ok_reason:
        notes.append(f"mathematically zero: {zero_ok_reason}; zeros are accepted")
    return Comparison(
        name,
        approx,
        None if approx else "mismatch",
        exact=exact,
        approx=approx,
        maxdiff=maxdiff if math.isfinite(maxdiff) else float("inf"),
        shape=shape,
        expected_shape=exp,
        notes=tuple(notes),
    )
