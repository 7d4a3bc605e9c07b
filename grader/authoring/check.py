"""The instructor's own check of a definition before it becomes a notebook, run in-process (the
instructor's code, trusted): the setup defines every name the steps read, the loss is a number
autograd can backpropagate, and each exercise's solution, where given, equals autograd's
gradients. The same order of cells as the notebook, so what passes here passes there."""

from __future__ import annotations

from pathlib import Path

import torch

from ..exercise.definition import FUNCTION, Definition
from ..reference.steps import definition_autograd
from ..reference.written import setup_namespace


def run_notebook_code(d: Definition, folder: Path) -> tuple[dict, dict]:
    """The notebook's setup and forward cells in one namespace, in `folder` (where the setup
    finds its files), and autograd's gradients, as the notebook's autograd cell computes them."""
    ns = setup_namespace(d, folder)
    missing = [x for x in (*d.params, *d.data, *d.constants) if x not in ns]
    if missing:
        raise ValueError(f"{d.name}: the setup cells do not define {', '.join(missing)}")
    unlearnable = [p for p in d.params if not getattr(ns[p], "requires_grad", False)]
    if unlearnable:
        raise ValueError(f"{d.name}: parameters without requires_grad=True: {', '.join(unlearnable)}")
    values, grads = definition_autograd(d, {k: ns[k] for k in (*d.params, *d.data, *d.constants)})
    ns.update(values)
    return ns, grads


def problems(d: Definition, folder: Path) -> list[str]:
    """What is wrong with the definition's solutions (empty: every given one matches autograd)."""
    ns, grads = run_notebook_code(d, folder)
    found = []
    for exercise, code in [(1, d.solution), *((g.exercise, g.solution) for g in d.in_one_go)]:
        if not code:
            continue
        exec(compile(code, f"<{d.name}: exercise {exercise}>", "exec"), ns)
        for g in (g for g in d.gradients() if g.exercise == exercise):
            got, want = ns.get(g.name), grads[g.target]
            if not isinstance(got, torch.Tensor) or got.shape != want.shape:
                found.append(f"exercise {exercise}: {g.name} is not a tensor of shape {tuple(want.shape)}")
            elif not torch.allclose(got, want, rtol=1e-4, atol=1e-6):
                found.append(
                    f"exercise {exercise}: {g.name} differs from autograd's by {(got - want).abs().max():.2g}"
                )
    return found + (_training_problems(d, ns, grads) if d.training and d.solution else [])


def _training_problems(d: Definition, ns: dict, grads: dict) -> list[str]:
    """The training exercise's answer (exercise 1's solution as manual_backward) returns
    autograd's gradient of every parameter."""
    from .notebook import training_answer

    exec(compile(training_answer(d), f"<{d.name}: exercise {d.training.exercise}>", "exec"), ns)
    returned = ns[FUNCTION](**{k: ns[k] for k in d.backward_arguments})
    return [
        f"exercise {d.training.exercise}: {FUNCTION}'s d{p} differs from autograd's"
        for p, got in zip(d.params, returned)
        if not torch.allclose(got, grads[p], rtol=1e-4, atol=1e-6)
    ]
