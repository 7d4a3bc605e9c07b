"""Grading inside the student's kernel: what the hidden test cells call.

Each call prints a short verdict on stdout and returns the score, which nbgrader reads
from the cell's result. Warnings and stderr are silenced: nbgrader gives 0 to a test
cell that writes to stderr, and a torch warning must not cost points.
"""
from __future__ import annotations

import contextlib
import io
import warnings

from . import grading, lecture, spec
from .compare import MISSING

def grade(grade_id: str, ns: dict) -> float:
    with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        try:
            verdict = _verdict(spec.BY_GRADE_ID[grade_id], ns)
        except Exception as e:  # a broken namespace must cost this cell only, with a message
            item = spec.BY_GRADE_ID[grade_id]
            verdict = grading.Verdict(grade_id, 0.0, item.points,
                                      [f"could not grade: {type(e).__name__}: {e}"])
    print(verdict.text())
    # A plain float in [0, points]: the only result form nbgrader parses as partial credit.
    return float(min(max(verdict.score, 0.0), verdict.max_score))


def _verdict(item, ns: dict) -> grading.Verdict:
    if item == spec.TRAINING:
        return grading.training_verdict(ns.get("lossi"), initial_loss=_ex4_initial_loss(ns))
    if item.exercise == 4:
        return grading.ex4_verdict(item, _ex4_run(ns))
    target = ns.get(item.target)
    reference = getattr(target, "grad", None)
    if reference is None:
        raise RuntimeError(f"no autograd reference: run the forward and backward cells ({item.target}.grad is None)")
    return grading.gradient_verdict(item, ns.get(item.name, MISSING), reference)


def _check_inputs(ns: dict):
    # A fixed batch and fresh parameters, independent of where training left them.
    params, g = lecture.init_params(seed=lecture.LECTURE_SEED, vocab_size=len(ns["itos"]),
                                    n_hidden=lecture.N_HIDDEN_TRAIN)
    Xb, Yb = lecture.draw_batch(ns["Xtr"], ns["Ytr"], g)
    return params, Xb, Yb


def _ex4_run(ns: dict) -> grading.Ex4Run:
    # No cache: a fixed helper of manual_backward must show at once (a call costs ms).
    return grading.run_ex4(ns.get(spec.EX4_FUNCTION), *_check_inputs(ns))


def _ex4_initial_loss(ns: dict) -> float:
    params, Xb, Yb = _check_inputs(ns)
    return float(lecture.cross_entropy_forward(params, Xb, Yb)["loss"])
