"""One short hint per failed gradient, from the student's value against the reference.

The value judged here is the student's rule given correct inputs where we have it (the
local run), so the hint describes their rule, not a mistake they inherited.
"""

from __future__ import annotations

import torch

from ..exercise import spec
from ..exercise.compare import ATOL, MISSING, Unusable, as_reference_shape
from ..exercise.graded import GradedExercise
from ..reference.inputs import FreshInputs
from ..reference.mistakes import known_mistakes
from ..replay.results import RunResult
from ..untrusted.protocol import STATUS_OK
from . import raised, relations
from .outcomes import SKIPPED, Outcome


def size_factors(sizes: dict[str, int]) -> list[tuple[float, str]]:
    """A written exercise's factors, by the names of its sizes (C, T, B): a mean over the wrong
    count, a division twice, a scale such as attention's C**-0.5 missing or twice."""
    out = []
    for k, size in sizes.items():
        if size >= 2:
            bessel = f"a mean over {k} divides by {k}, not {k}-1 (or the reverse)"
            out += [
                (size / (size - 1), f"{k}/({k}-1): {bessel}"),
                ((size - 1) / size, f"({k}-1)/{k}: {bessel}"),
                (float(size), f"{k}: divide by {k} once"),
                (1.0 / size, f"1/{k}: divide by {k} once, not twice"),
                (size**0.5, f"{k}**0.5: a scale of {k}**-0.5 missing"),
                (size**-0.5, f"{k}**-0.5: a scale of {k}**-0.5 applied twice"),
            ]
    return out + factors(None)


def factors(n: int | None) -> list[tuple[float, str]]:
    """The factors a gradient is typically off by; those of the batch size n where there is one."""
    plain = [(-1.0, "-1: the sign is flipped"), (2.0, "2"), (0.5, "1/2")]
    if n is None or n < 2:
        return plain
    return [
        (n / (n - 1), "n/(n-1): Bessel's correction, the variance divides by n-1, not n"),
        ((n - 1) / n, "(n-1)/n: Bessel's correction, the variance divides by n-1, not n"),
        (float(n), "n: the loss is a mean over the batch, divide by n once"),
        (1.0 / n, "1/n: the loss is a mean over the batch, divide by n once, not twice"),
        (-1.0, "-1: the sign is flipped"),
        (2.0, "2"),
        (0.5, "1/2"),
        (float(n - 1), "n-1"),
        (1.0 / (n - 1), "1/(n-1)"),
    ]


def shape_hint(value: torch.Tensor, reference: torch.Tensor) -> str | None:
    s, e = tuple(value.shape), tuple(reference.shape)
    if value.dim() == 2 and s == e[::-1] and relations.close(value.T, reference):
        return f"transposed: you have {s}, expected {e}; for Z = A @ B, dA = dZ @ B.T and dB = A.T @ dZ"
    vector = lambda shape: sum(d != 1 for d in shape) <= 1
    if vector(s) and vector(e) and value.numel() != reference.numel():
        return (
            f"summed over the wrong dimension? you have shape {s}, expected {e}: sum over the "
            f"dimension that was broadcast in the forward pass (keepdim=True keeps it)"
        )
    return None


def value_hint(
    name: str,
    value: torch.Tensor,
    reference: torch.Tensor,
    *,
    n: int,
    branches: dict[str, torch.Tensor] | None = None,
    mistakes: dict[str, torch.Tensor] | None = None,
    aliases: list[list[str]] = (),
    n_seen=None,
    upstream: torch.Tensor | None = None,
    forward: dict[str, torch.Tensor] | None = None,
    sizes: dict[str, int] | None = None,
) -> str:
    """`upstream`: the gradient the step receives (one consumer only); `forward`: the forward
    pass's tensors; `sizes`: a written exercise's sizes by name (its factors' names)."""
    v = as_reference_shape(value, reference.shape)
    if v is None:
        return (
            shape_hint(value, reference)
            or f"wrong shape {tuple(value.shape)}, expected {tuple(reference.shape)}"
        )
    v, r = v.double(), reference.double()
    if not bool(torch.isfinite(v).all()):
        return f"{name} contains NaN or inf"
    shared = _shared_memory(name, aliases)
    if shared:
        return shared
    if float(v.abs().max()) == 0.0 and float(r.abs().max()) > ATOL:
        return f"{name} is all zeros"
    if overwritten := _n_overwritten(n_seen, n):
        return overwritten
    for label, alt in (mistakes or {}).items():
        if relations.close(v, alt.double()):
            return label
    return (
        _one_branch(v, branches)
        or _scaled(v, r, size_factors(sizes) if sizes else factors(n))
        or relations.offset(v, r)
        or relations.sum_for_product(v, r, upstream)
        or relations.forward_factor(v, r, forward or {})
        or (f"values differ from the reference (maxdiff {float((v - r).abs().max()):.3g})")
    )


def _n_overwritten(n_seen, n: int | None) -> str | None:
    if n_seen is None or n is None or n_seen == n:
        return None
    return (
        f"`n` is {n_seen!r} when this cell runs, not the batch size {n}: "
        "did a loop variable named n overwrite it?"
    )


def _shared_memory(name: str, aliases) -> str | None:
    for a, b in aliases:
        if name in (a, b):
            other = b if name == a else a
            return (
                f"{name} and {other} are the same tensor in memory: one was assigned from the other "
                f"without .clone(), and a later += changed both"
            )
    return None


def _one_branch(v: torch.Tensor, branches) -> str | None:
    """Only one of the gradient's branches (a variable used twice in the forward pass)."""
    if branches and len(branches) > 1:
        for via, part in branches.items():
            if relations.close(v, part.double()):
                others = " and ".join(f"`{o}`" for o in branches if o != via)
                return (
                    f"you have the part of the gradient through `{via}` but not the part through "
                    f"{others}: a variable used twice gets both gradients added (+=)"
                )
    return None


def _scaled(v: torch.Tensor, r: torch.Tensor, known: list[tuple[float, str]]) -> str | None:
    """The right direction, off by a constant factor (1/n, n/(n-1), ...: `known`)."""
    rr = float((r * r).sum())
    if rr > 0:
        c = float((v * r).sum()) / rr
        if relations.close(v, c * r) and abs(c - 1) > 1e-3:
            for f, label in known:
                if abs(c - f) <= 1e-3 * abs(f):
                    return f"off by a factor of {label}"
            return f"off by a constant factor of about {c:.4g}"
    return None


def explain(
    o: Outcome, value, main: RunResult, fresh: FreshInputs, n: int, exercise: GradedExercise = spec.NINJA
) -> str | None:
    """The hint a failed gradient owes, on `value` (its own rule's where that shows it), from what
    the replay saw of the notebook as submitted (`main`)."""
    name, names = o.gradient.name, main.meta.get("names", [])
    if value is MISSING and main.status not in (STATUS_OK, SKIPPED):
        return f"the replay of your notebook stopped before this was computed: {main.status}"
    n_seen = main.meta.get("n_at", {}).get(o.cell) if o.cell else None
    if overwritten := _n_overwritten(n_seen, n):  # the cause of whatever the cell then raised or computed
        return overwritten
    # the run whose value is explained: exercise 1's own rule, with correct upstream gradients
    errors = raised.in_cell(o.own_errors if o.own is not None else o.errors, o.cell)
    failed = raised.raised(name, errors, names=names)
    if failed:  # the statement that computes it raised: that, not what its value looks like
        return failed
    if value is MISSING:
        return raised.unassigned(name, names=names, errors=errors, renamed=o.renamed)
    if not isinstance(value, torch.Tensor):
        return value.message if isinstance(value, Unusable) else None
    return value_hint(
        name,
        value,
        o.reference,
        n=n,
        branches=o.branches,
        aliases=main.meta.get("aliases", []),
        mistakes=known_mistakes(exercise.definition, name, fresh.values, fresh.grads),
        n_seen=n_seen,
        upstream=_upstream(o, fresh, exercise),
        forward=fresh.values,
        sizes=None if exercise is spec.NINJA else _sizes(fresh, exercise),
    )


def _sizes(fresh: FreshInputs, exercise: GradedExercise) -> dict[str, int]:
    """A written exercise's integer constants, as its steps read them (C, T, n...)."""
    return {k: fresh.values[k] for k in exercise.definition.constants if type(fresh.values.get(k)) is int}


def _upstream(o: Outcome, fresh: FreshInputs, exercise: GradedExercise) -> torch.Tensor | None:
    """The gradient an exercise-1 step receives, when it has one consumer."""
    if o.gradient.exercise != 1:
        return None
    consumers = exercise.definition.consumers(o.gradient.target)
    return fresh.grads.get(consumers[0]) if len(consumers) == 1 else None
