"""Where a grade comes from: a verdict per graded cell, from the student's values and the
reference values. Nothing here knows where the values were computed (the student's
kernel or a replay), so the same rules serve both.
"""
from __future__ import annotations

import inspect
import math
from dataclasses import dataclass, field

import torch

from . import lecture, spec
from .compare import MISSING, Comparison, compare

# Exercise 4's training check in the student's kernel: the loss after the capped run must
# have fallen this much below the loss at initialisation (about 3.3 -> below 2.9 in 1,000 steps).
TRAINING_DROP = 0.3
# The judge's (grader/judge.py): the replay trains with the student's backward at TRAINING_LR,
# the judge with the kit's from the same start; the student's validation loss must beat every net
# that ignores its input (~2.81 on names.txt) and be at most TRAINING_TOLERANCE above the kit's.
# Measured, 16 seeds x 100 steps (kit 2.64-2.73): Bessel, 1-h, dC with =, 0.75x gradients end
# within +0.06 and pass; 0.5x within +0.17 (8/16 also beat 2.81); 10*param ends at ln 27, +0.56;
# zeroing the hidden layer but learning the rest +0.10..+0.20: only the context-free bound stops it.
TRAINING_LR = 0.1
TRAINING_TOLERANCE = 0.2


@dataclass
class Verdict:
    grade_id: str
    score: float
    max_score: float
    lines: list[str] = field(default_factory=list)
    hint: str | None = None
    carried: bool = False       # credited for a right rule that received a wrong input
    problem: str | None = None  # the comparison's: missing, shape, mismatch, ...

    def text(self) -> str:
        mark = "PASS" if self.score == self.max_score else "FAIL"
        return "\n".join([f"{mark} {self.grade_id}: {_pts(self.score)}/{_pts(self.max_score)} points"]
                         + [f"  {line}" for line in self.lines])


def _pts(x: float) -> str:
    return f"{x:g}"


def gradient_verdict(gradient: spec.Gradient, value, reference: torch.Tensor) -> Verdict:
    cmp = compare(gradient.name, value, reference, zero_ok_reason=spec.ZERO_GRADIENTS.get(gradient.name))
    return _from_comparison(gradient, cmp)


def _from_comparison(gradient: spec.Gradient, cmp: Comparison) -> Verdict:
    lines = [cmp.line()]
    if not cmp.ok and cmp.problem not in ("mismatch",):
        lines.append(cmp.message())
    return Verdict(gradient.grade_id, gradient.points if cmp.ok else 0.0, gradient.points, lines,
                   problem=cmp.problem)


def decide(gradient: spec.Gradient, *, main, reference: torch.Tensor, local=None,
           wrong_inputs: list[str] = (), carried_credit: float = 1.0, hint=None) -> Verdict:
    """The replay's verdict. `main` is what the student's notebook computed; `local` what
    their code computed when every upstream gradient was replaced by the correct one.
    `hint` is called only for a failure, with the value that shows the student's rule."""
    zero = spec.ZERO_GRADIENTS.get(gradient.name)
    cm = compare(gradient.name, main, reference, zero_ok_reason=zero)
    if cm.ok:
        return _from_comparison(gradient, cm)
    cl = compare(gradient.name, local, reference, zero_ok_reason=zero) if local is not None else None
    if cl is not None and cl.ok:
        why = (f"your rule is right; it received a wrong {' and a wrong '.join(f'`{w}`' for w in wrong_inputs)}"
               if wrong_inputs else "your rule is right when it is given correct upstream gradients")
        score = round(gradient.points * carried_credit, 6)
        return Verdict(gradient.grade_id, score, gradient.points,
                       [cm.line(), f"{why} (credit for a carried error: {score:g}/{gradient.points:g})"],
                       carried=True)
    text = hint(local if local is not None and cl.problem != "missing" else main) if hint else None
    verdict = _from_comparison(gradient, cm)
    if text:
        verdict.hint = text
        verdict.lines = [cm.line(), f"hint: {text}"]
    return verdict


# ---------------------------------------------------------------- exercise 4
@dataclass
class Ex4Run:
    """The student's manual_backward called once on a batch, and autograd's answer."""
    grads: dict[str, object]          # parameter name -> student's value (or MISSING)
    reference: dict[str, torch.Tensor]
    error: str | None = None


def run_ex4(fn, params: dict, Xb: torch.Tensor, Yb: torch.Tensor) -> Ex4Run:
    v = lecture.cross_entropy_forward(params, Xb, Yb, track=True)
    v["loss"].backward()
    reference = {k: v[k].grad.detach().clone() for k in spec.EX4_PARAMETERS}
    missing = {k: MISSING for k in spec.EX4_PARAMETERS}
    if not callable(fn):
        return Ex4Run(missing, reference, f"{spec.EX4_FUNCTION} is not defined as a function")
    inputs = {k: (t.detach().clone() if isinstance(t, torch.Tensor) else t)
              for k, t in v.items() if k in spec.EX4_ARGUMENTS}
    try:
        kwargs = accepted_arguments(fn, inputs)
        with torch.no_grad():
            out = fn(**kwargs)
        if out is None:
            return Ex4Run(missing, reference, f"{spec.EX4_FUNCTION} returned None: it needs `return [dC, dW1, db1, dW2, db2, dbngain, dbnbias]`")
        out = list(out)
    except Exception as e:  # the student's code: any failure is a message, not a crash
        return Ex4Run(missing, reference, f"{spec.EX4_FUNCTION} raised {type(e).__name__}: {e}")
    if len(out) != len(spec.EX4_PARAMETERS):
        return Ex4Run(missing, reference, f"{spec.EX4_FUNCTION} returned {len(out)} values, "
                      f"expected {len(spec.EX4_PARAMETERS)}: [d{', d'.join(spec.EX4_PARAMETERS)}]")
    return Ex4Run(dict(zip(spec.EX4_PARAMETERS, out)), reference)


def accepted_arguments(fn, inputs: dict) -> dict:
    """The keyword arguments `fn` takes, by name (all of them if it has **kwargs)."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):  # a builtin or a callable without a signature
        return inputs
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return inputs
    return {k: inputs[k] for k in params if k in inputs}


def ex4_verdict(gradient: spec.Gradient, run: Ex4Run) -> Verdict:
    verdict = gradient_verdict(gradient, run.grads[gradient.target], run.reference[gradient.target])
    if run.error:
        verdict.lines = [run.error]
    return verdict


def training_verdict(lossi, *, initial_loss: float) -> Verdict:
    check = spec.TRAINING
    losses = [10 ** x for x in lossi] if lossi else []
    if not losses:
        return Verdict(check.grade_id, 0.0, check.points, ["the training loop recorded no loss"])
    tail = losses[-max(1, len(losses) // 10):]
    final = sum(tail) / len(tail)
    if not math.isfinite(final):
        return Verdict(check.grade_id, 0.0, check.points, ["the training loss became NaN or inf"])
    ok = final <= initial_loss - TRAINING_DROP
    line = (f"loss {initial_loss:.3f} at initialisation, {final:.3f} averaged over the last "
            f"{len(tail)} of {len(losses)} steps (needs to fall below {initial_loss - TRAINING_DROP:.3f})")
    return Verdict(check.grade_id, check.points if ok else 0.0, check.points, [line])
