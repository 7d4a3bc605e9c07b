"""Any exercise's references by autograd alone, from its definition's forward pass: every
value and the gradient of the loss w.r.t. every step and parameter, and each reader's share of
a tensor read twice (what the missing-branch hint compares with). No step rule is needed (a new
exercise has none). Trusted side only: the sandbox never sees this folder.
"""

from __future__ import annotations

import torch

from ..exercise.definition import Definition


def definition_autograd(d: Definition, start: dict) -> tuple[dict, dict]:
    """Any exercise's forward pass from `start` (its parameters, data and sizes): every value
    (detached) and autograd's gradient of the loss w.r.t. every step and parameter."""
    v = {k: (t.detach().clone().requires_grad_(True) if k in d.params else t) for k, t in start.items()}
    with torch.enable_grad():  # also under a caller's no_grad
        v = d.forward(v, on_step=lambda name, t: t.retain_grad() if name != d.loss else None)
        if v[d.loss].dim() != 0:
            raise ValueError(f"{d.name}: the last step, {d.loss}, is not a number")
        v[d.loss].backward()
    grads = {k: v[k].grad.detach().clone() for k in [*(s.name for s in d.steps[:-1]), *d.params]}
    values = {k: (t.detach() if isinstance(t, torch.Tensor) else t) for k, t in v.items()}
    return values, grads


def autograd_branches(values: dict, grads: dict, d: Definition) -> dict[str, dict[str, torch.Tensor]]:
    """For each tensor read by more than one step, each reader's share of its gradient, by
    autograd alone: that step's expression evaluated again on the tensor (the rest held fixed),
    pulled back from the step's own gradient. What the missing-branch hint compares with; no
    step rule is needed (a new exercise has none)."""
    out: dict[str, dict[str, torch.Tensor]] = {}
    for name in [*d.params, *(s.name for s in d.steps)]:
        readers = d.consumers(name)
        if len(readers) < 2:
            continue
        for reader in readers:
            leaf = values[name].detach().clone().requires_grad_(True)
            with torch.enable_grad():
                made = d.forward_step(reader, dict(values, **{name: leaf}))
                d_out = grads[reader] if reader in grads else torch.ones_like(made)
                # the sum's backward hands d_out on exactly (1.0 * x is x); grad_outputs= would
                # import torch's symbolic shapes and sympy, 0.33 CPU-s in each grading process
                (share,) = torch.autograd.grad((made * d_out).sum(), leaf)
            out.setdefault(name, {})[reader] = share
    return out
