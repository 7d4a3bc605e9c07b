"""The answers: the lecture's chunked forward pass, each step with its local backward rule
beside it (as in micrograd), autograd's gradients and the kit's own backprop by the rules.

Trusted side only: the sandbox never sees this folder, so no answer can import the rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from ..exercise.network import BN_EPS
from ..exercise.spec import PARAMETERS


# ---------------------------------------------------------------- forward and backward, step by step
@dataclass(frozen=True)
class Step:
    out: str
    inputs: tuple[str, ...]
    forward: Callable[[dict], torch.Tensor]
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


STEPS: list[Step] = [
    Step("emb", ("C",), lambda v: v["C"][v["Xb"]], _emb_backward),
    Step(
        "embcat",
        ("emb",),
        lambda v: v["emb"].view(v["emb"].shape[0], -1),
        lambda v, d: {"emb": d.view(v["emb"].shape)},
    ),
    Step(
        "hprebn",
        ("embcat", "W1", "b1"),
        lambda v: v["embcat"] @ v["W1"] + v["b1"],
        lambda v, d: {"embcat": d @ v["W1"].T, "W1": v["embcat"].T @ d, "b1": d.sum(0)},
    ),
    Step(
        "bnmeani",
        ("hprebn",),
        lambda v: 1 / _n(v) * v["hprebn"].sum(0, keepdim=True),
        lambda v, d: {"hprebn": torch.ones_like(v["hprebn"]) * d / _n(v)},
    ),
    Step(
        "bndiff",
        ("hprebn", "bnmeani"),
        lambda v: v["hprebn"] - v["bnmeani"],
        lambda v, d: {"hprebn": d.clone(), "bnmeani": -d.sum(0, keepdim=True)},
    ),
    Step("bndiff2", ("bndiff",), lambda v: v["bndiff"] ** 2, lambda v, d: {"bndiff": 2 * v["bndiff"] * d}),
    Step(
        "bnvar",
        ("bndiff2",),
        lambda v: 1 / (_n(v) - 1) * (v["bndiff2"]).sum(0, keepdim=True),
        lambda v, d: {"bndiff2": torch.ones_like(v["bndiff2"]) * d / (_n(v) - 1)},
    ),
    Step(
        "bnvar_inv",
        ("bnvar",),
        lambda v: (v["bnvar"] + BN_EPS) ** -0.5,
        lambda v, d: {"bnvar": -0.5 * (v["bnvar"] + BN_EPS) ** -1.5 * d},
    ),
    Step(
        "bnraw",
        ("bndiff", "bnvar_inv"),
        lambda v: v["bndiff"] * v["bnvar_inv"],
        lambda v, d: {"bndiff": v["bnvar_inv"] * d, "bnvar_inv": (v["bndiff"] * d).sum(0, keepdim=True)},
    ),
    Step(
        "hpreact",
        ("bngain", "bnraw", "bnbias"),
        lambda v: v["bngain"] * v["bnraw"] + v["bnbias"],
        lambda v, d: {
            "bngain": (v["bnraw"] * d).sum(0, keepdim=True),
            "bnraw": v["bngain"] * d,
            "bnbias": d.sum(0, keepdim=True),
        },
    ),
    Step(
        "h",
        ("hpreact",),
        lambda v: torch.tanh(v["hpreact"]),
        lambda v, d: {"hpreact": (1.0 - v["h"] ** 2) * d},
    ),
    Step(
        "logits",
        ("h", "W2", "b2"),
        lambda v: v["h"] @ v["W2"] + v["b2"],
        lambda v, d: {"h": d @ v["W2"].T, "W2": v["h"].T @ d, "b2": d.sum(0)},
    ),
    Step("logit_maxes", ("logits",), lambda v: v["logits"].max(1, keepdim=True).values, _max_backward),
    Step(
        "norm_logits",
        ("logits", "logit_maxes"),
        lambda v: v["logits"] - v["logit_maxes"],
        lambda v, d: {"logits": d.clone(), "logit_maxes": -d.sum(1, keepdim=True)},
    ),
    Step(
        "counts",
        ("norm_logits",),
        lambda v: v["norm_logits"].exp(),
        lambda v, d: {"norm_logits": v["counts"] * d},
    ),
    Step(
        "counts_sum",
        ("counts",),
        lambda v: v["counts"].sum(1, keepdims=True),
        lambda v, d: {"counts": torch.ones_like(v["counts"]) * d},
    ),
    Step(
        "counts_sum_inv",
        ("counts_sum",),
        lambda v: v["counts_sum"] ** -1,
        lambda v, d: {"counts_sum": -(v["counts_sum"] ** -2) * d},
    ),
    Step(
        "probs",
        ("counts", "counts_sum_inv"),
        lambda v: v["counts"] * v["counts_sum_inv"],
        lambda v, d: {
            "counts": v["counts_sum_inv"] * d,
            "counts_sum_inv": (v["counts"] * d).sum(1, keepdim=True),
        },
    ),
    Step("logprobs", ("probs",), lambda v: v["probs"].log(), lambda v, d: {"probs": d / v["probs"]}),
    Step("loss", ("logprobs",), lambda v: -v["logprobs"][range(_n(v)), v["Yb"]].mean(), _loss_backward),
]
STEP_OF = {s.out: s for s in STEPS}


def consumers(name: str) -> list[str]:
    """Forward steps that read `name`: each is one branch of its gradient."""
    return [s.out for s in STEPS if name in s.inputs]


def upstream(name: str) -> set[str]:
    """Tensors whose gradients flow into `name`'s gradient (closer to the loss)."""
    seen: set[str] = set()
    todo = consumers(name)
    while todo:
        c = todo.pop()
        if c not in seen:
            seen.add(c)
            todo.extend(consumers(c))
    seen.discard("loss")
    return seen


def forward(params: dict, Xb: torch.Tensor, Yb: torch.Tensor, *, track: bool = False) -> dict:
    """Run the chunked forward pass; with track=True every tensor keeps its autograd grad."""
    v = {k: t.detach().clone().requires_grad_(track) for k, t in params.items()}
    v["Xb"], v["Yb"], v["n"] = Xb, Yb, Xb.shape[0]
    for s in STEPS:
        v[s.out] = s.forward(v)
        if track and s.out != "loss":
            v[s.out].retain_grad()
    return v


def autograd_grads(params: dict, Xb: torch.Tensor, Yb: torch.Tensor) -> tuple[dict, dict]:
    """Values (detached) and the autograd gradient of the loss w.r.t. every tensor."""
    with torch.enable_grad():  # also under a caller's no_grad
        v = forward(params, Xb, Yb, track=True)
        v["loss"].backward()
    names = [s.out for s in STEPS if s.out != "loss"] + PARAMETERS
    grads = {k: v[k].grad.detach().clone() for k in names}
    values = {k: (t.detach() if isinstance(t, torch.Tensor) else t) for k, t in v.items()}
    return values, grads


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
