"""Calling the student's `manual_backward` (exercise 4): with the keywords it takes, and one
wording for what can go wrong, in the kernel's checks and in the replay alike; applying what it
returns as the notebook's training loop does."""

from __future__ import annotations

import inspect
from collections.abc import Sequence

import torch

from ..exercise import spec


class BackwardFailed(Exception):
    """The call gave no usable list of gradients; the message says why, for the student."""


def accepted_names(fn) -> frozenset[str] | None:
    """The keywords `fn` takes by name; None if it takes any (**kwargs, or no signature)."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):  # a builtin or a callable without a signature
        return None
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return None
    return frozenset(params)


def accepted_arguments(fn, inputs: dict) -> dict:
    """The keyword arguments `fn` takes, of `inputs` (all of them if it has **kwargs)."""
    return taken(inputs, accepted_names(fn))


def taken(inputs: dict, names: frozenset[str] | None) -> dict:
    """Those of `inputs` named in `names` (`accepted_names`: a loop reads them once)."""
    return inputs if names is None else {k: v for k, v in inputs.items() if k in names}


def call_manual_backward(fn, inputs: dict, params: Sequence[str] = tuple(spec.PARAMETERS)) -> list:
    """The gradients `fn` returns, in the order of `params` (Backprop Ninja's by default), or
    BackwardFailed. Exceptions the student's code raises pass through: the caller decides how
    far they may go."""
    if not callable(fn):
        raise BackwardFailed(f"{spec.EX4_FUNCTION} is not defined as a function")
    out = fn(**accepted_arguments(fn, inputs))
    if out is None:
        raise BackwardFailed(f"{spec.EX4_FUNCTION} returned None: it needs `return [d{', d'.join(params)}]`")
    out = list(out)
    if len(out) != len(params):
        raise BackwardFailed(
            f"{spec.EX4_FUNCTION} returned {len(out)} values, expected {len(params)}: [d{', d'.join(params)}]"
        )
    return out


def as_update(name: str, grad, param: torch.Tensor) -> torch.Tensor:
    """`grad` as the notebook's loop applies it (`p.data += -lr * grad`): it must broadcast to
    the parameter's own shape, as an in-place add requires; nothing is reshaped for it."""
    grad = torch.as_tensor(grad)
    have, want = tuple(grad.shape), tuple(param.shape)
    # broadcast by hand: torch's own helper is out of reach in a blocked run
    fits = len(have) <= len(want) and all(h in (1, w) for h, w in zip(have[::-1], want[::-1]))
    if not fits:
        raise ValueError(
            f"d{name} has shape {have}: the notebook's update `p.data += -lr * grad` "
            f"cannot add it to {name}, of shape {want}"
        )
    return grad


def raised(e: BaseException) -> str:
    return f"{spec.EX4_FUNCTION} raised {type(e).__name__}: {e}"
