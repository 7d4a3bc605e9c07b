"""Backprop Ninja's named mistakes: the lecture's classic wrong rules, computed from the correct
inputs, so a hint can name the mistake (grader/reference/mistakes.py finds an exercise's).

Keyed by the student's variable; each entry maps a hint to the value that mistake gives.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def catalogue(name: str, values: dict, grads: dict) -> dict[str, torch.Tensor]:
    """`values`: the forward values; `grads`: the correct gradients, by tensor name."""
    v, d = values, grads  # short names: the formulas below read like the lecture's
    n = v["Xb"].shape[0]
    if name == "dprobs":
        return {
            "the local derivative of log(x) is 1/x: dprobs = (1.0 / probs) * dlogprobs": v["probs"]
            * d["logprobs"]
        }
    if name == "dhpreact":
        return {
            "the local derivative of tanh is 1 - h**2, not 1 - h": (1.0 - v["h"]) * d["h"],
            "the local derivative of tanh is 1 - h**2, written with h = tanh(hpreact)": (
                1.0 - v["hpreact"] ** 2
            )
            * d["h"],
        }
    if name == "dhprebn":
        hp = d["hpreact"]
        g, inv, raw = v["bngain"], v["bnvar_inv"], v["bnraw"]
        return {
            "Bessel's correction: the variance divides by n-1, so the last term needs n/(n-1)": g
            * inv
            / n
            * (n * hp - hp.sum(0) - raw * (hp * raw).sum(0))
        }
    if name == "dC":  # `dC[ix] = ...` in the loop: a character seen twice keeps its last gradient
        kept = torch.zeros_like(v["C"])
        for k, ix in enumerate(v["Xb"].view(-1).tolist()):
            kept[ix] = d["emb"].view(-1, kept.shape[1])[k]
        why = "a character seen more than once in the batch kept only its last gradient: accumulate with +="
        return {why: kept}
    if name == "dlogits":
        return {"subtract 1 at the correct class: dlogits[range(n), Yb] -= 1": F.softmax(v["logits"], 1) / n}
    return {}
