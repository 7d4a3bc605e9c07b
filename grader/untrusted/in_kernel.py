"""Grading inside the student's kernel: what the hidden test cells call (`grader.incell.grade`).

These checks compare with autograd in the student's own kernel, as the lecture's `cmp` does;
they are what a student sees when running the notebook. The grades that count come from the
replay (grader/verdicts/judge.py), which replaces these cells' outputs when autograding.

Each call prints a short verdict on stdout and returns the score, which nbgrader reads
from the cell's result. Warnings and stderr are silenced: nbgrader gives 0 to a test
cell that writes to stderr, and a torch warning must not cost points.
"""

from __future__ import annotations

import contextlib
import io
import math
import warnings
from dataclasses import dataclass

import torch

from ..exercise import spec
from ..exercise.compare import MISSING, compare
from ..exercise.definition import Gradient
from ..exercise.definitions import backprop_ninja as lecture
from ..exercise.definitions.backprop_ninja import network
from ..exercise.graded import Check
from ..exercise.verdict import Verdict, from_comparison, gradient_verdict
from .backward_call import BackwardFailed, call_manual_backward, raised

# The loss after the kernel's capped training run must have fallen this much below the loss
# at initialisation (about 3.3 -> below 2.9 in 1,000 steps).
TRAINING_DROP = 0.3


def grade(grade_id: str, ns: dict) -> float:
    item = spec.BY_GRADE_ID[grade_id]
    return _graded(item, lambda: _verdict(item, ns))


def grade_gradient(grade_id: str, ns: dict, points: float) -> float:
    """A written exercise's hidden test (grader/authoring/): `ex<k>_d<X>` asks the gradient dX,
    compared with X.grad from the notebook's autograd cell."""
    exercise, name = grade_id.removeprefix("ex").split("_", 1)
    item = Gradient(int(exercise), name, name[1:], float(points))
    return _graded(
        item, lambda: from_comparison(item, compare(name, ns.get(name, MISSING), _reference(item, ns)))
    )


def grade_training(grade_id: str, ns: dict, points: float) -> float:
    """A written exercise's training point, in the kernel: the loss its loop recorded fell."""
    exercise, name = grade_id.removeprefix("ex").split("_", 1)
    check = Check(int(exercise), name, float(points))
    lossi = ns.get("lossi")
    start = 10 ** lossi[0] if isinstance(lossi, list) and lossi else math.nan
    return _graded(check, lambda: training_verdict(lossi, initial_loss=start, check=check))


def _graded(item, verdict_of) -> float:
    """The cell's output, and its score as nbgrader reads it."""
    with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        try:
            verdict = verdict_of()
        except Exception as e:  # a broken namespace must cost this cell only, with a message
            verdict = Verdict(item.grade_id, 0.0, item.points, [f"could not grade: {type(e).__name__}: {e}"])
    print(verdict.text())
    # A plain float in [0, points]: the only result form nbgrader parses as partial credit.
    return float(min(max(verdict.score, 0.0), verdict.max_score))


def _reference(item: Gradient, ns: dict):
    """X.grad, as the notebook's autograd cell left it."""
    reference = getattr(ns.get(item.target), "grad", None)
    if reference is None:
        raise RuntimeError(
            f"no autograd reference: run the forward and backward cells ({item.target}.grad is None)"
        )
    return reference


def _verdict(item, ns: dict) -> Verdict:
    if item == spec.TRAINING:
        return training_verdict(ns.get("lossi"), initial_loss=_ex4_initial_loss(ns))
    if item.exercise == 4:
        return ex4_verdict(item, _ex4_run(ns))
    return gradient_verdict(item, ns.get(item.name, MISSING), _reference(item, ns))


def _check_inputs(ns: dict):
    # A fixed batch and fresh parameters, independent of where training left them.
    params, g = network.init_params(
        seed=lecture.LECTURE_SEED, vocab_size=len(ns["itos"]), n_hidden=lecture.N_HIDDEN_TRAIN
    )
    Xb, Yb = network.draw_batch(ns["Xtr"], ns["Ytr"], g)
    return params, Xb, Yb


_block: dict | None = None  # while a block of hidden tests runs (one_block): its exercise-4 runs


@contextlib.contextmanager
def one_block():
    """A block of hidden tests, run in one round trip (test_cells.py): nothing of the student's
    runs between its cells, so its exercise-4 cells share one call of manual_backward (7 calls
    were 7 forward and backward passes, about 20 ms a kernel)."""
    global _block
    _block = {}
    try:
        yield
    finally:
        _block = None


def _ex4_run(ns: dict) -> Ex4Run:
    # Otherwise no cache: a cell run again after a helper of manual_backward is fixed shows it.
    fn = ns.get(spec.EX4_FUNCTION)
    if _block is None:
        return run_ex4(fn, *_check_inputs(ns))
    held = (fn, ns.get("Xtr"), ns.get("Ytr"), ns.get("itos"))  # kept with the run: no id reused
    key = tuple(map(id, held))
    if key not in _block:
        _block[key] = (held, run_ex4(fn, *_check_inputs(ns)))
    return _block[key][1]


def _ex4_initial_loss(ns: dict) -> float:
    params, Xb, Yb = _check_inputs(ns)
    return float(network.cross_entropy_forward(params, Xb, Yb)["loss"])


# ---------------------------------------------------------------- exercise 4
@dataclass
class Ex4Run:
    """The student's manual_backward called once on a batch, and autograd's answer."""

    grads: dict[str, object]  # parameter name -> student's value (or MISSING)
    reference: dict[str, torch.Tensor]
    error: str | None = None


def run_ex4(fn, params: dict, Xb: torch.Tensor, Yb: torch.Tensor) -> Ex4Run:
    v = network.cross_entropy_forward(params, Xb, Yb, track=True)
    v["loss"].backward()
    reference = {k: v[k].grad.detach().clone() for k in spec.PARAMETERS}
    missing = {k: MISSING for k in spec.PARAMETERS}
    inputs = {
        k: (t.detach().clone() if isinstance(t, torch.Tensor) else t)
        for k, t in v.items()
        if k in spec.EX4_ARGUMENTS
    }
    try:
        with torch.no_grad():
            out = call_manual_backward(fn, inputs)
    except BackwardFailed as e:
        return Ex4Run(missing, reference, str(e))
    except Exception as e:  # the student's code: any failure is a message, not a crash
        return Ex4Run(missing, reference, raised(e))
    return Ex4Run(dict(zip(spec.PARAMETERS, out)), reference)


def ex4_verdict(gradient: spec.Gradient, run: Ex4Run) -> Verdict:
    verdict = gradient_verdict(gradient, run.grads[gradient.target], run.reference[gradient.target])
    if run.error:
        verdict.lines = [run.error]
    return verdict


def training_verdict(lossi, *, initial_loss: float, check: Check = spec.TRAINING) -> Verdict:
    """The kernel's check of exercise 4's training: the recorded loss fell far enough."""
    losses = [10**x for x in lossi] if lossi else []
    if not losses:
        return Verdict(check.grade_id, 0.0, check.points, ["the training loop recorded no loss"])
    tail = losses[-max(1, len(losses) // 10) :]
    final = sum(tail) / len(tail)
    if not math.isfinite(final):
        return Verdict(check.grade_id, 0.0, check.points, ["the training loss became NaN or inf"])
    ok = final <= initial_loss - TRAINING_DROP
    line = (
        f"loss {initial_loss:.3f} at initialisation, {final:.3f} averaged over the last "
        f"{len(tail)} of {len(losses)} steps (needs to fall below {initial_loss - TRAINING_DROP:.3f})"
    )
    return Verdict(check.grade_id, check.points if ok else 0.0, check.points, [line])
