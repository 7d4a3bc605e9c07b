"""Backprop Ninja (makemore part 4): the lecture's two-layer MLP with BatchNorm, its forward
pass exactly as the lecture chunks it, and what the student backpropagates through it; its sizes,
and exercise 4 (training with the student's own backward: network.py has its forward pass).
The answers (its step rules, its named mistakes, its demo class) are judge-side, in
grader/reference/backprop_ninja/."""

from __future__ import annotations

from ...definition import FUNCTION, Definition, InOneGo, Step

# The lecture's sizes and constants (network.py builds the net from them).
LECTURE_SEED = 2147483647
BLOCK_SIZE = 3
BATCH_SIZE = 32
N_EMBD = 10
N_HIDDEN = 64  # exercises 1-3
N_HIDDEN_TRAIN = 200  # exercise 4
BN_EPS = 1e-5
# The lecture's learning rate for the first 100,000 steps (the replay's short training run).
LEARNING_RATE = 0.1

# Exercise 4's backward is a function the locked training loop calls with these keywords; it
# returns the gradients of the lecture's `parameters` (the definition's params), in their order.
EX4_FUNCTION = FUNCTION
EX4_ARGUMENTS = (
    *("Xb", "Yb", "emb", "embcat", "hprebn", "bnvar_inv", "bnraw", "h", "logits"),
    *("C", "W1", "b1", "W2", "b2", "bngain", "bnbias"),
)

BACKPROP_NINJA = Definition(
    name="backprop_ninja",
    # the lecture's `parameters`, in its order: exercise 4 returns their gradients in this order
    params=("C", "W1", "b1", "W2", "b2", "bngain", "bnbias"),
    data=("Xb", "Yb"),
    seed=LECTURE_SEED,
    constants=("n",),
    steps=(
        Step("emb", "C[Xb]", "embed the characters into vectors"),
        Step("embcat", "emb.view(emb.shape[0], -1)", "concatenate the vectors"),
        Step("hprebn", "embcat @ W1 + b1", "hidden layer pre-activation"),
        Step("bnmeani", "1/n*hprebn.sum(0, keepdim=True)"),
        Step("bndiff", "hprebn - bnmeani"),
        Step("bndiff2", "bndiff**2"),
        Step(
            "bnvar",
            "1/(n-1)*(bndiff2).sum(0, keepdim=True)",
            "note: Bessel's correction (dividing by n-1, not n)",
        ),
        Step("bnvar_inv", "(bnvar + 1e-5)**-0.5"),
        Step("bnraw", "bndiff * bnvar_inv"),
        Step("hpreact", "bngain * bnraw + bnbias"),
        Step("h", "torch.tanh(hpreact)", "hidden layer"),
        Step("logits", "h @ W2 + b2", "output layer"),
        Step("logit_maxes", "logits.max(1, keepdim=True).values"),
        Step("norm_logits", "logits - logit_maxes", "subtract max for numerical stability"),
        Step("counts", "norm_logits.exp()"),
        Step("counts_sum", "counts.sum(1, keepdims=True)"),
        Step(
            "counts_sum_inv",
            "counts_sum**-1",
            "if I use (1.0 / counts_sum) instead then I can't get backprop to be bit exact...",
        ),
        Step("probs", "counts * counts_sum_inv"),
        Step("logprobs", "probs.log()"),
        Step("loss", "-logprobs[range(n), Yb].mean()"),
    ),
    zero_gradients={
        "dlogit_maxes": "the max trick does not change the loss",
        "db1": "BatchNorm subtracts the batch mean, which cancels b1",
    },
    in_one_go=(
        InOneGo(2, "logits", "loss", 2.0),  # F.cross_entropy's backward in one formula
        InOneGo(3, "hprebn", "hpreact", 2.0),  # BatchNorm's, from dhpreact
    ),
)
