"""A GPT block backpropagated by hand, as Karpathy's llm.c does it in C (train_gpt2.c's
encoder_backward, layernorm_backward, matmul_backward, attention_backward, gelu_backward,
residual_backward, crossentropy_softmax_backward): token and position embeddings, LayerNorm
chunked as the lecture chunks BatchNorm, one causal self-attention head, a residual, a second
LayerNorm, an MLP with tanh-GELU, a second residual, a final LayerNorm and the output layer tied to
the token embeddings, on the characters of names.txt. The second assignment after Backprop Ninja:
the same students, the same names, one block of the model that comes next in the series."""

from __future__ import annotations

from ..definition import Cell, Definition, InOneGo, Step, Training
from .names import READ_NAMES, READ_NAMES_TEXT

STREAM = """\
# one stream of characters, the names separated by '.', as a GPT reads text
import random
random.seed(42)
random.shuffle(words)  # as the lecture shuffles them: the names held out are like the rest
chars = sorted(list(set(''.join(words))))
stoi = {s:i+1 for i,s in enumerate(chars)}
stoi['.'] = 0
itos = {i:s for s,i in stoi.items()}
vocab_size = len(itos)
text = torch.tensor([stoi[ch] for ch in '.' + '.'.join(words) + '.'])
n1 = int(0.9 * len(text))
train, val = text[:n1], text[n1:]  # the first 90% to learn from, the rest to check on
print(vocab_size, len(train), len(val))"""

PARAMS = """\
block_size = 8  # T: how many characters the block sees at once
n_embd = 16  # C: the width of the residual stream
n_hidden = 4 * n_embd  # the MLP's width
B, T, C = 32, block_size, n_embd  # batch, time, channels: llm.c's names

g = torch.Generator().manual_seed(2147483647)  # for reproducibility
def randn(*shape, scale=1.0, shift=0.0):
  return torch.randn(shape, generator=g) * scale + shift
wte = randn(vocab_size, C, scale=0.3)  # token embeddings, also the output layer (tied, as in GPT-2)
wpe = randn(T, C, scale=0.3)  # position embeddings
# LayerNorms start near (1, 0), not exactly, so that every gradient has something to show
ln1w, ln1b = randn(C, scale=0.1, shift=1.0), randn(C, scale=0.1)
Wq, Wk, Wv = randn(C, C, scale=C**-0.5), randn(C, C, scale=C**-0.5), randn(C, C, scale=C**-0.5)
Wo, bo = randn(C, C, scale=C**-0.5), randn(C, scale=0.1)
ln2w, ln2b = randn(C, scale=0.1, shift=1.0), randn(C, scale=0.1)
Wfc, bfc = randn(C, n_hidden, scale=C**-0.5), randn(n_hidden, scale=0.1)
Wproj, bproj = randn(n_hidden, C, scale=n_hidden**-0.5), randn(C, scale=0.1)
lnfw, lnfb = randn(C, scale=0.1, shift=1.0), randn(C, scale=0.1)
parameters = [wte, wpe, ln1w, ln1b, Wq, Wk, Wv, Wo, bo, ln2w, ln2b, Wfc, bfc, Wproj, bproj, lnfw, lnfb]
print(sum(p.nelement() for p in parameters))  # number of parameters in total
for p in parameters:
  p.requires_grad = True"""

BATCH = """\
# a batch of B windows of T characters; each position predicts the character after it
ix = torch.randint(0, len(train) - T - 1, (B,), generator=g)
Xb = torch.stack([train[i:i+T] for i in ix])
Yb = torch.stack([train[i+1:i+T+1] for i in ix])
mask = torch.tril(torch.ones(T, T)) == 0  # True where a position would see its future"""


def _layernorm(p: str, x: str, note: str) -> tuple[Step, ...]:
    """A LayerNorm over the channels, chunked as the lecture chunks BatchNorm."""
    return (
        Step(f"{p}mean", f"1/C*{x}.sum(-1, keepdim=True)", note),
        Step(f"{p}diff", f"{x} - {p}mean"),
        Step(f"{p}diff2", f"{p}diff**2"),
        Step(
            f"{p}var", f"1/C*{p}diff2.sum(-1, keepdim=True)", "LayerNorm divides by C: no Bessel's correction"
        ),
        Step(f"{p}rstd", f"({p}var + 1e-5)**-0.5"),
        Step(f"{p}raw", f"{p}diff * {p}rstd"),
        Step(p, f"{p}raw * {p}w + {p}b"),
    )


STEPS = (
    Step("tok_emb", "wte[Xb]", "(B, T, C): each character's embedding"),
    Step("x0", "tok_emb + wpe", "plus its position's: the residual stream"),
    *_layernorm("ln1", "x0", "LayerNorm 1"),
    Step("q", "ln1 @ Wq", "one head of causal self-attention"),
    Step("k", "ln1 @ Wk"),
    Step("v", "ln1 @ Wv"),
    Step("scores", "q @ k.transpose(1, 2)", "(B, T, T): how much each position attends to each"),
    Step("scaled", "scores * C**-0.5"),
    Step("masked", "scaled.masked_fill(mask, float('-inf'))", "no position sees its future"),
    Step("att", "F.softmax(masked, -1)"),
    Step("attv", "att @ v"),
    Step("attproj", "attv @ Wo + bo"),
    Step("x1", "x0 + attproj", "residual"),
    *_layernorm("ln2", "x1", "LayerNorm 2"),
    Step("fc", "ln2 @ Wfc + bfc", "the MLP"),
    Step("fc3", "fc**3"),
    Step("gelu_in", "0.7978845608*(fc + 0.044715*fc3)", "tanh-GELU, as GPT-2: sqrt(2/pi) = 0.7978845608"),
    Step("gelu_th", "torch.tanh(gelu_in)"),
    Step("gelu", "0.5*fc*(1 + gelu_th)"),
    Step("mlp", "gelu @ Wproj + bproj"),
    Step("x2", "x1 + mlp", "residual"),
    *_layernorm("lnf", "x2", "the final LayerNorm"),
    Step("logits", "lnf @ wte.T", "the output layer is wte: tied"),
    Step("logprobs", "F.log_softmax(logits, -1)"),
    Step("loss", "-logprobs.gather(2, Yb.unsqueeze(2)).mean()"),
)


def _layernorm_backward(p: str, x: str, first: bool) -> str:
    """llm.c's layernorm_backward, one line a step; `first`: whether it starts d{x}."""
    op = "=" if first else "+="
    return f"""\
d{p}raw = d{p} * {p}w
d{p}w = (d{p} * {p}raw).sum((0, 1))
d{p}b = d{p}.sum((0, 1))
d{p}diff = d{p}raw * {p}rstd
d{p}rstd = (d{p}raw * {p}diff).sum(-1, keepdim=True)
d{p}var = -0.5*({p}var + 1e-5)**-1.5 * d{p}rstd
d{p}diff2 = torch.ones_like({p}diff2) / C * d{p}var
d{p}diff += 2*{p}diff * d{p}diff2
d{p}mean = -d{p}diff.sum(-1, keepdim=True)
d{x} {op} d{p}diff + d{p}mean / C"""


def _matmul_backward(out: str, x: str, w: str, b: str | None = None) -> str:
    """llm.c's matmul_backward for out = x @ w (+ b) over (B, T, ...)."""
    lines = [f"d{x} = d{out} @ {w}.T", f"d{w} = {x}.flatten(0, 1).T @ d{out}.flatten(0, 1)"]
    return "\n".join(lines + ([f"d{b} = d{out}.sum((0, 1))"] if b else []))


SOLUTION = "\n".join(
    [
        "dlogprobs = torch.zeros_like(logprobs)",
        "dlogprobs.scatter_(2, Yb.unsqueeze(2), -1.0/(B*T))",
        "dlogits = dlogprobs - logprobs.exp() * dlogprobs.sum(-1, keepdim=True)",
        "dlnf = dlogits @ wte",
        "dwte = dlogits.flatten(0, 1).T @ lnf.flatten(0, 1)  # the output layer's share",
        _layernorm_backward("lnf", "x2", first=True),
        "dx1 = dx2.clone()",
        "dmlp = dx2.clone()",
        _matmul_backward("mlp", "gelu", "Wproj", "bproj"),
        "dfc = 0.5*(1 + gelu_th) * dgelu",
        "dgelu_th = 0.5*fc * dgelu",
        "dgelu_in = (1 - gelu_th**2) * dgelu_th",
        "dfc += 0.7978845608 * dgelu_in",
        "dfc3 = 0.7978845608*0.044715 * dgelu_in",
        "dfc += 3*fc**2 * dfc3",
        _matmul_backward("fc", "ln2", "Wfc", "bfc"),
        _layernorm_backward("ln2", "x1", first=False),
        "dx0 = dx1.clone()",
        "dattproj = dx1.clone()",
        _matmul_backward("attproj", "attv", "Wo", "bo"),
        "datt = dattv @ v.transpose(1, 2)",
        "dv = att.transpose(1, 2) @ dattv",
        "dmasked = att * (datt - (datt * att).sum(-1, keepdim=True))",
        "dscaled = dmasked.masked_fill(mask, 0.0)",
        "dscores = dscaled * C**-0.5",
        "dq = dscores @ k",
        "dk = dscores.transpose(1, 2) @ q",
        "dln1 = dq @ Wq.T + dk @ Wk.T + dv @ Wv.T",
        *(
            f"d{w} = ln1.flatten(0, 1).T @ d{y}.flatten(0, 1)"
            for w, y in (("Wq", "q"), ("Wk", "k"), ("Wv", "v"))
        ),
        _layernorm_backward("ln1", "x0", first=False),
        "dtok_emb = dx0.clone()",
        "dwpe = dx0.sum(0)",
        "dwte.index_add_(0, Xb.flatten(), dtok_emb.flatten(0, 1))  # the embedding's share",
    ]
)

GPT_BLOCK = Definition(
    name="gpt_block",
    title="A GPT block, backpropagated by hand",
    intro=(
        "After Backprop Ninja's MLP, one block of a GPT: embeddings, LayerNorm, causal self-attention,\n"
        "residuals, an MLP with GELU, the output layer. Every step is one line of torch, and you write\n"
        "the gradient of each, as llm.c does in C. Same names, same data: makemore's names.txt."
    ),
    params=(
        *("wte", "wpe", "ln1w", "ln1b", "Wq", "Wk", "Wv", "Wo", "bo"),
        *("ln2w", "ln2b", "Wfc", "bfc", "Wproj", "bproj", "lnfw", "lnfb"),
    ),
    data=("Xb", "Yb"),
    constants=("B", "T", "C", "mask"),
    setup=(
        Cell("data_read", READ_NAMES, READ_NAMES_TEXT),
        Cell("data_stream", STREAM),
        Cell("params", PARAMS, "## The block\n\nllm.c's shapes: B windows of T characters, C channels."),
        Cell("batch", BATCH),
    ),
    steps=STEPS,
    solution=SOLUTION,
    files=("names.txt",),
    in_one_go=(
        InOneGo(
            2,
            "x2",
            "lnf",
            2.0,
            "LayerNorm in one go",
            "As exercise 3 of Backprop Ninja did for BatchNorm: the seven lines of the final LayerNorm in\n"
            "one formula. Its statistics are over the C channels of one position, not over the batch.",
            "dx2 = lnfrstd * (dlnf*lnfw - (dlnf*lnfw).mean(-1, keepdim=True)"
            " - lnfraw * (dlnf*lnfw*lnfraw).mean(-1, keepdim=True))",
        ),
        InOneGo(
            3,
            "scores",
            "attv",
            2.0,
            "Softmax attention in one go",
            "From the gradient of the attention's output to the gradient of the raw scores: the softmax,\n"
            "the mask and the scale in one formula (llm.c's attention_backward does it in one loop).",
            "datt = dattv @ v.transpose(1, 2)\n"
            "dscores = C**-0.5 * att * (datt - (datt * att).sum(-1, keepdim=True))",
        ),
    ),
    training=Training(
        4,
        learning_rate=0.3,
        steps=500,
        title="train the block with your own backward pass",
        text=(
            "As exercise 4 of Backprop Ninja: the block learns from names.txt with your gradients alone.\n"
            "Your exercise 1 is the body of `manual_backward`; the loop calls it once a step."
        ),
    ),
)
