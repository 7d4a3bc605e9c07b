"""A machine's pace: a fixed piece of torch work, timed where a run's cells are timed.

A virtual machine's core computes at a pace that moves by 2x and more from one second to the
next (its host's other loads; two cores' paces hardly agree). The numeric bound compares a
run's cells with a derived backward's cost (grader/verdicts/numeric.py), so both must be timed
at one pace: the replay server times this work just before and just after each run
(grader/untrusted/server.py), on the run's core, and the judge times it beside the reference
backward, to carry its cost over to the run's pace. It is shaped as a derived backward is (the
lecture's sizes, small ops, no autograd); both sides import it from here, neither's own code.
"""

from __future__ import annotations

import time

import torch

REPEATS = 5  # timings a pace is the fastest of (the work: 0.12 to 0.25 ms)


def _tensors() -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(0)
    return tuple(torch.randn(*shape, generator=g) for shape in ((32, 30), (30, 64), (64,), (64, 27)))


_T = _tensors()


def work(x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor, w2: torch.Tensor) -> float:
    """A BatchNorm layer's forward and backward by hand, in the lecture's sizes."""
    h = x @ w1 + b1
    d = h - h.mean(0, keepdim=True)
    inv = (d.pow(2).sum(0, keepdim=True) / 31 + 1e-5).rsqrt()
    a = torch.tanh(d * inv)
    dlogits = torch.softmax(a @ w2, 1) - 1 / 27
    da = (1 - a * a) * (dlogits @ w2.T)
    dh = inv / 32 * (32 * da - da.sum(0) - 31 / 32 * d * inv * inv * (da * d).sum(0))
    return float((x.T @ dh).sum() + dh.sum(0).sum() + (a.T @ dlogits).sum())


def seconds(repeats: int = REPEATS) -> float:
    """This thread's CPU seconds for `work`, the fastest of `repeats` timings."""
    best = float("inf")
    with torch.no_grad():
        for _ in range(repeats):
            started = time.thread_time()
            work(*_T)
            best = min(best, time.thread_time() - started)
    return best
