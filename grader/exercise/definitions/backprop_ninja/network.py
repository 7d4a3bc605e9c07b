"""The lecture's network, as students see it: the data split, the initialisation, batches
and exercise 4's forward pass (F.cross_entropy). No backward rule lives here: this folder
is visible inside the sandbox, and the step rules are the answers (grader/reference/backprop_ninja/).

The notebook's locked cells spell out the same code for students; a test runs both and
checks they agree.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from . import BATCH_SIZE, BLOCK_SIZE, BN_EPS, LECTURE_SEED, N_EMBD, N_HIDDEN


# ---------------------------------------------------------------- data
@dataclass
class Dataset:
    stoi: dict[str, int]
    itos: dict[int, str]
    Xtr: torch.Tensor
    Ytr: torch.Tensor
    Xdev: torch.Tensor
    Ydev: torch.Tensor
    Xte: torch.Tensor
    Yte: torch.Tensor

    @property
    def vocab_size(self) -> int:
        return len(self.itos)


# The notebook's data-split cell, as students read it (a test checks the notebook holds it): the
# warm servers recognise it by its code and build its splits with build_dataset below
# (grader/untrusted/known_cells.py).
DATA_SPLIT_CELL = """\
# build the dataset
block_size = 3 # context length: how many characters do we take to predict the next one?

def build_dataset(words):
  X, Y = [], []

  for w in words:
    context = [0] * block_size
    for ch in w + '.':
      ix = stoi[ch]
      X.append(context)
      Y.append(ix)
      context = context[1:] + [ix] # crop and append

  X = torch.tensor(X)
  Y = torch.tensor(Y)
  print(X.shape, Y.shape)
  return X, Y

random.seed(42)
random.shuffle(words)
n1 = int(0.8*len(words))
n2 = int(0.9*len(words))

Xtr,  Ytr  = build_dataset(words[:n1])     # 80%
Xdev, Ydev = build_dataset(words[n1:n2])   # 10%
Xte,  Yte  = build_dataset(words[n2:])     # 10%"""


def build_dataset(words: list[str], stoi: dict[str, int], block_size: int = BLOCK_SIZE):
    """The notebook's loop (each character of each word, with the `block_size` before it, the
    word padded with "." in front), as the tensors it makes, without a Python step per example:
    the words end to end, each behind its padding, read through a sliding window (0.55 s of CPU
    in the judge's process for the lecture's three splits, now a tenth of it)."""
    flat, is_target = [], []
    for w in words:
        ids = [stoi[ch] for ch in w + "."]
        flat += [0] * block_size + ids
        is_target += [False] * block_size + [True] * len(ids)
    seq = torch.tensor(flat, dtype=torch.long)
    keep = torch.tensor(is_target[block_size:], dtype=torch.bool)
    if not words:
        return seq.new_zeros((0, block_size)), seq
    return seq.unfold(0, block_size, 1)[:-1][keep].contiguous(), seq[block_size:][keep]


def load_dataset(words: list[str], block_size: int = BLOCK_SIZE) -> Dataset:
    chars = sorted(set("".join(words)))
    stoi = {s: i + 1 for i, s in enumerate(chars)}
    stoi["."] = 0
    itos = {i: s for s, i in stoi.items()}
    words = list(words)
    # The lecture shuffles with Python's global RNG; keep that, but do not leak the state.
    state = random.getstate()
    random.seed(42)
    random.shuffle(words)
    random.setstate(state)
    n1, n2 = int(0.8 * len(words)), int(0.9 * len(words))
    return Dataset(
        stoi,
        itos,
        *build_dataset(words[:n1], stoi, block_size),
        *build_dataset(words[n1:n2], stoi, block_size),
        *build_dataset(words[n2:], stoi, block_size),
    )


# ---------------------------------------------------------------- parameters
def init_params(
    *,
    seed: int = LECTURE_SEED,
    vocab_size: int = 27,
    n_embd: int = N_EMBD,
    n_hidden: int = N_HIDDEN,
    block_size: int = BLOCK_SIZE,
) -> tuple[dict, torch.Generator]:
    """The lecture's non-standard init. The lecture drew bngain and bnbias from torch's
    global generator, which torch now seeds randomly at start-up; the notebook seeds it
    with `torch.manual_seed(seed)` first, which draws the same numbers as `gbn` here."""
    g = torch.Generator().manual_seed(seed)
    fan_in = n_embd * block_size
    p = {}
    p["C"] = torch.randn((vocab_size, n_embd), generator=g)
    p["W1"] = torch.randn((fan_in, n_hidden), generator=g) * (5 / 3) / (fan_in**0.5)
    p["b1"] = torch.randn(n_hidden, generator=g) * 0.1
    p["W2"] = torch.randn((n_hidden, vocab_size), generator=g) * 0.1
    p["b2"] = torch.randn(vocab_size, generator=g) * 0.1
    gbn = torch.Generator().manual_seed(seed)
    p["bngain"] = torch.randn((1, n_hidden), generator=gbn) * 0.1 + 1.0
    p["bnbias"] = torch.randn((1, n_hidden), generator=gbn) * 0.1
    return p, g


def draw_batch(X: torch.Tensor, Y: torch.Tensor, g: torch.Generator, batch_size: int = BATCH_SIZE):
    ix = torch.randint(0, X.shape[0], (batch_size,), generator=g)
    return X[ix], Y[ix]


def cross_entropy_forward(params: dict, Xb: torch.Tensor, Yb: torch.Tensor, *, track: bool = False) -> dict:
    """Exercise 4's shorter forward pass (F.cross_entropy, bnvar from .var)."""
    v = {k: t.detach().clone().requires_grad_(track) for k, t in params.items()}
    v["Xb"], v["Yb"] = Xb, Yb
    v["emb"] = v["C"][Xb]
    v["embcat"] = v["emb"].view(v["emb"].shape[0], -1)
    v["hprebn"] = v["embcat"] @ v["W1"] + v["b1"]
    bnmean = v["hprebn"].mean(0, keepdim=True)
    bnvar = v["hprebn"].var(0, keepdim=True, unbiased=True)
    v["bnvar_inv"] = (bnvar + BN_EPS) ** -0.5
    v["bnraw"] = (v["hprebn"] - bnmean) * v["bnvar_inv"]
    v["hpreact"] = v["bngain"] * v["bnraw"] + v["bnbias"]
    v["h"] = torch.tanh(v["hpreact"])
    v["logits"] = v["h"] @ v["W2"] + v["b2"]
    v["loss"] = F.cross_entropy(v["logits"], Yb)
    return v
