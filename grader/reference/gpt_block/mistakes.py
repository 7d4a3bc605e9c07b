"""The GPT block's named mistakes: classic wrong rules of its softmaxes and its GELU, computed
from the correct inputs, so a hint can name the mistake (grader/reference/mistakes.py finds it).
Its LayerNorms' divisor, its residuals' and its tied embedding's branches, its scales need none:
the generic hints name a missing factor or a missing branch.

Keyed by the student's variable; each entry maps a hint to the value that mistake gives.
"""

from __future__ import annotations

import torch


def catalogue(name: str, values: dict, grads: dict) -> dict[str, torch.Tensor]:
    """`values`: the forward values; `grads`: the correct gradients, by tensor name."""
    v, d = values, grads  # short names: the formulas below read like the solution's
    if name == "dlogits":
        why = "log_softmax's derivative has a second term: every logit of a row shares its normaliser"
        return {why: d["logprobs"]}
    if name == "dmasked":
        why = "softmax's derivative is not att alone: each output of a row depends on every input of it"
        return {why: v["att"] * d["att"]}
    if name == "dgelu_in":
        return {
            "the local derivative of tanh is 1 - tanh**2, not 1 - tanh": (1.0 - v["gelu_th"]) * d["gelu_th"],
            "the local derivative of tanh is 1 - tanh**2, written with its output, not its input": (
                1.0 - v["gelu_in"] ** 2
            )
            * d["gelu_th"],
        }
    return {}
