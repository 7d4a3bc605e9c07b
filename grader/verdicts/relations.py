"""How a wrong gradient relates to the right one, in words a student acts on: every entry off by
the same constant (a sum started from ones), a sum where the chain rule multiplies, or a factor
that is one of the forward pass's own tensors (one that belongs to another step).

Each test is exact up to the comparison's tolerance on the judge's fresh inputs: a relation that
holds there, on random parameters and a random batch, is no coincidence.
"""

from __future__ import annotations

import torch

from ..exercise.compare import ATOL, RTOL

TINY = 1e-3  # entries this small next to the largest are left out of a ratio (noise, not signal)


def close(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal up to the comparison's tolerance (compare.py), in double precision."""
    return a.shape == b.shape and bool(torch.allclose(a.double(), b.double(), rtol=RTOL, atol=ATOL))


def offset(v: torch.Tensor, r: torch.Tensor) -> str | None:
    """The same constant added to every entry."""
    d = v - r
    c = float(d.flatten()[0])
    if abs(c) <= ATOL or not close(d, torch.full_like(d, c)):
        return None
    if abs(c - 1) <= 1e-6:
        return (
            "every entry is off by exactly 1: a gradient accumulated with += starts from "
            "torch.zeros_like, not torch.ones_like"
        )
    return f"every entry is off by the same {c:.4g}: a constant is added where none belongs"


def sum_for_product(v: torch.Tensor, r: torch.Tensor, upstream: torch.Tensor | None) -> str | None:
    """local + upstream where the chain rule wants local * upstream (an elementwise step)."""
    if upstream is None or upstream.shape != r.shape:
        return None
    up = upstream.double()
    keep = up.abs() > TINY * float(up.abs().max())
    if int(keep.sum()) < keep.numel() // 2:
        return None
    local = r[keep] / up[keep]
    if not close(v[keep], local + up[keep]):
        return None
    return (
        "a sum where a product belongs: the chain rule multiplies this step's local derivative "
        "by the gradient coming in (`*`, not `+`)"
    )


def forward_factor(v: torch.Tensor, r: torch.Tensor, forward: dict[str, torch.Tensor]) -> str | None:
    """v = c * T * r or v = c * r / T, T one of the forward pass's tensors."""
    keep = r.abs() > TINY * float(r.abs().max())
    if not bool(keep.any()):
        return None
    ratio = v[keep] / r[keep]
    for name, t in forward.items():
        if not isinstance(t, torch.Tensor) or not t.is_floating_point():
            continue
        try:
            t = t.double().expand_as(v)[keep]
        except RuntimeError:  # not broadcastable to this gradient's shape
            continue
        for times, product in ((True, t), (False, 1.0 / t)):
            pp = float((product * product).sum())
            if pp == 0 or not bool(torch.isfinite(product).all()):
                continue
            c = float((ratio * product).sum()) / pp
            if abs(c) > ATOL and bool(torch.allclose(ratio, c * product, rtol=1e-4, atol=1e-6)):
                scale = "" if abs(c - 1) < 1e-4 else f" (times {c:.4g})"
                if times:
                    return f"off by a factor of `{name}`{scale}: that factor belongs to another step"
                return f"a factor of `{name}` is missing{scale}"
    return None
