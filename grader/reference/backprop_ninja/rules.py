"""Backprop Ninja's answers: each step of the lecture's chunked forward pass (its definition's,
in grader/exercise/definitions/backprop_ninja/) with its local backward rule (as micrograd keeps
them), autograd's gradients of the lecture's batch and the kit's own backprop by the rules (the
unit the numeric bound counts in, and an oracle for the tests).

Trusted side only: the sandbox never sees this folder, so no answer can import the rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from ...exercise.definitions.backprop_ninja import BACKPROP_NINJA as EXERCISE
from ...exercise.definitions.backprop_ninja import BN_EPS
from ..steps import definition_autograd


# ---------------------------------------------------------------- each step's backward rule
@dataclass(frozen=True)
class Step:
    out: str
    inputs: tuple[str, ...]  # what the step reads, as the definition's expression names it
    # (values, d_out) -> contribution of this step to the gradient of each input
    backward: Callable[[dict, torch.Tensor], dict[str, torch.Tensor]]


def _loss_backward(v, d):
    n = v["Xb"].shape[0]
    dlogprobs = torch.zeros_like(v["logprobs"])
    dlogprobs[range(n), v["Yb"]] = -1.0 / n
    return {"logprobs": dlogprobs * d}


def _max_backward(v, d):
    routed = F.one_hot(v["logits"].max(1).indices, num_classes=v["logits"].shape[1]).to(d.dtype)
    return {"logits": routed * d}


def _emb_backward(v, d):
    dC = torch.zeros_like(v["C"])
    dC.index_add_(0, v["Xb"].view(-1), d.reshape(-1, d.shape[-1]))
    return {"C": dC}


def _n(v):
    return v["Xb"].shape[0]


# The local rule of each step of the definition's forward pass (its expression is beside it in
# grader/exercise/definitions/backprop_ninja/): d_out -> each input's share.
RULES: dict[str, Callable[[dict, torch.Tensor], dict[str, torch.Tensor]]] = {
    "emb": _emb_backward,
    "embcat": lambda v, d: {"emb": d.view(v["emb"].shape)},
    "hprebn": lambda v, d: {"embcat": d @ v["W1"].T, "W1": v["embcat"].T @ d, "b1": d.sum(0)},
    "bnmeani": lambda v, d: {"hprebn": torch.ones_like(v["hprebn"]) * d / _n(v)},
    "bndiff": lambda v, d: {"hprebn": d.clone(), "bnmeani": -d.sum(0, keepdim=True)},
    "bndiff2": lambda v, d: {"bndiff": 2 * v["bndiff"] * d},
    "bnvar": lambda v, d: {"bndiff2": torch.ones_like(v["bndiff2"]) * d / (_n(v) - 1)},
    "bnvar_inv": lambda v, d: {"bnvar": -0.5 * (v["bnvar"] + BN_EPS) ** -1.5 * d},
    "bnraw": lambda v, d: {"bndiff": v["bnvar_inv"] * d, "bnvar_inv": (v["bndiff"] * d).sum(0, keepdim=True)},
    "hpreact": lambda v, d: {
        "bngain": (v["bnraw"] * d).sum(0, keepdim=True),
        "bnraw": v["bngain"] * d,
        "bnbias": d.sum(0, keepdim=True),
    },
    "h": lambda v, d: {"hpreact": (1.0 - v["h"] ** 2) * d},
    "logits": lambda v, d: {"h": d @ v["W2"].T, "W2": v["h"].T @ d, "b2": d.sum(0)},
    "logit_maxes": _max_backward,
    "norm_logits": lambda v, d: {"logits": d.clone(), "logit_maxes": -d.sum(1, keepdim=True)},
    "counts": lambda v, d: {"norm_logits": v["counts"] * d},
    "counts_sum": lambda v, d: {"counts": torch.ones_like(v["counts"]) * d},
    "counts_sum_inv": lambda v, d: {"counts_sum": -(v["counts_sum"] ** -2) * d},
    "probs": lambda v, d: {
        "counts": v["counts_sum_inv"] * d,
        "counts_sum_inv": (v["counts"] * d).sum(1, keepdim=True),
    },
    "logprobs": lambda v, d: {"probs": d / v["probs"]},
    "loss": _loss_backward,
}
STEPS: list[Step] = [Step(s.name, EXERCISE.inputs[s.name], RULES[s.name]) for s in EXERCISE.steps]
STEP_OF = {s.out: s for s in STEPS}


def forward(params: dict, Xb: torch.Tensor, Yb: torch.Tensor, *, track: bool = False) -> dict:
    """Run the chunked forward pass (the definition's); with track=True every tensor keeps its
    autograd grad."""
    v = {k: t.detach().clone().requires_grad_(track) for k, t in params.items()}
    v["Xb"], v["Yb"], v["n"] = Xb, Yb, Xb.shape[0]
    keep = (lambda name, t: t.retain_grad() if name != EXERCISE.loss else None) if track else None
    return EXERCISE.forward(v, on_step=keep)


def autograd_grads(params: dict, Xb: torch.Tensor, Yb: torch.Tensor) -> tuple[dict, dict]:
    """Values (detached) and the autograd gradient of the loss w.r.t. every tensor."""
    return definition_autograd(EXERCISE, {**params, "Xb": Xb, "Yb": Yb, "n": Xb.shape[0]})


def manual_grads(values: dict) -> tuple[dict, dict]:
    """Backprop by the step rules. Returns the gradients and, for each tensor, the
    contribution of each branch (consumer) to its gradient, for the missing-branch hint."""
    grads = {"loss": torch.ones(())}
    branches: dict[str, dict[str, torch.Tensor]] = {}
    for s in reversed(STEPS):
        for inp, contrib in s.backward(values, grads[s.out]).items():
            branches.setdefault(inp, {})[s.out] = contrib
            grads[inp] = grads[inp] + contrib if inp in grads else contrib
    del grads["loss"]
    return grads, branches
