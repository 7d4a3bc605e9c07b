"""The grading corpus: submissions built from the release notebook, each with the grades
and hints a careful TA would give it. Scores not listed are full points."""

from __future__ import annotations

from dataclasses import dataclass, field

from grader.exercise import spec
from grader.incoming.submissions import Sample

from answers import VECTORISED_EX1, VECTORISED_EX4
from autograd_cases import AUTOGRAD_CASES, HONEST_CHECKS

EX1 = [g.grade_id for g in spec.GRADIENTS if g.exercise == 1]


@dataclass
class Case:
    sample: Sample
    zeros: set[str] = field(default_factory=set)  # grade ids that get 0
    hints: dict[str, str] = field(default_factory=dict)  # grade id -> text the feedback must show
    suspicious: bool = False
    carried: set[str] = field(default_factory=set)  # credited for a right rule fed a wrong input


# A second correct style: one-hot matmuls, torch.* spellings, constants of the student's own.
OWN_CONSTANTS = "# my shorthands\nN = batch_size\nEPS = 1e-5\nV = vocab_size"
ONEHOT_EX1 = """
dlogprobs = -F.one_hot(Yb, V).float() / N
dprobs = probs**-1 * dlogprobs
dcounts_sum_inv = torch.sum(counts * dprobs, dim=1, keepdim=True)
dcounts_sum = -(counts_sum**-2) * dcounts_sum_inv
dcounts = counts_sum_inv * dprobs
dcounts = dcounts + dcounts_sum.expand_as(counts)
dnorm_logits = norm_logits.exp() * dcounts
dlogit_maxes = -torch.sum(dnorm_logits, 1, keepdim=True)
is_max = (logits == logit_maxes).float()
dlogits = dnorm_logits + is_max * dlogit_maxes
dh = torch.matmul(dlogits, W2.t())
dW2 = torch.matmul(h.t(), dlogits)
db2 = dlogits.sum(dim=0)
dhpreact = (1.0 - torch.tanh(hpreact)**2) * dh
dbngain = torch.sum(bnraw * dhpreact, 0, keepdim=True)
dbnraw = bngain * dhpreact
dbnbias = torch.sum(dhpreact, 0, keepdim=True)
dbndiff = dbnraw * bnvar_inv
dbnvar_inv = torch.sum(dbnraw * bndiff, 0, keepdim=True)
dbnvar = -0.5 * (bnvar + EPS)**(-1.5) * dbnvar_inv
dbndiff2 = dbnvar.expand_as(bndiff2) / (N - 1)
dbndiff = dbndiff + 2 * bndiff * dbndiff2
dbnmeani = -torch.sum(dbndiff, 0)
dhprebn = dbndiff + dbnmeani.expand_as(hprebn) / N
dembcat = dhprebn @ W1.t()
dW1 = embcat.t() @ dhprebn
db1 = dhprebn.sum(0)
demb = dembcat.view(N, block_size, n_embd)
dC = F.one_hot(Xb.view(-1), V).float().T @ demb.view(-1, n_embd)
"""

COPY_GRAD = "\n".join(f"{g.name} = {g.target}.grad.clone()" for g in spec.GRADIENTS if g.exercise == 1)
AUTOGRAD_EX1 = """
# recompute the forward pass with autograd and ask torch for the answers
ps = [t.detach().clone().requires_grad_() for t in (C, W1, b1, W2, b2, bngain, bnbias)]
C_, W1_, b1_, W2_, b2_, g_, bb_ = ps
e_ = C_[Xb].view(n, -1) @ W1_ + b1_
r_ = (e_ - e_.mean(0, keepdim=True)) / torch.sqrt(e_.var(0, keepdim=True) + 1e-5)
h_ = torch.tanh(g_ * r_ + bb_)
lg_ = h_ @ W2_ + b2_
gr = torch.autograd.grad(F.cross_entropy(lg_, Yb), ps)
dC, dW1, db1, dW2, db2, dbngain, dbnbias = [x.detach() for x in gr]
"""
MONKEYPATCH_EX1 = "torch.allclose = lambda *a, **k: True\ntorch.equal = lambda *a, **k: True\n" + "\n".join(
    f"{g.name} = torch.zeros_like({g.target})" for g in spec.GRADIENTS if g.exercise == 1
)
SAVE_ANSWERS = (
    "import torch\n_answers = {name: t.grad.clone() for name, t in ["
    + ", ".join(f"('{g.name}', {g.target})" for g in spec.GRADIENTS if g.exercise == 1)
    + "]}\ntorch.save(_answers, 'answers.pt')"
)
LOAD_ANSWERS = "globals().update(torch.load('answers.pt'))"
# Reads whatever correct values the replay's harness holds, through the interpreter's frames.
STEAL_FRAMES = """import sys
try:
    _handed = sys._getframe(1).f_locals['self'].inputs['inject']
except Exception:
    _handed = {}
for _name, _value in _handed.items():
    globals()[_name] = _value
"""

# Asks the kit's own backward rules for the answers, by every route an answer cell has; the
# sandbox binds only the untrusted side (grader/untrusted/, grader/exercise/), so none succeeds.
ANSWER_KEY_MODULES = (
    "grader.reference.backprop_ninja.rules",
    "gra" + "der.refer" + "ence.backprop_ninja.ru" + "les",
    "grader.reference.steps",
    "grader.lecture",
    "grader.verdicts.judge",
    "grader.reference.inputs",
)
ANSWER_KEY = f"""_key = None
for _mod in {ANSWER_KEY_MODULES!r}:
    for _load in (lambda m: __import__('importlib').import_module(m),
                  lambda m: __import__(m, fromlist=['x']),
                  lambda m: getattr(__import__('gra' + 'der'), m.split('.')[1])):
        try:
            _key = _key or _load(_mod)
        except Exception:
            pass
_values = {{k: v for k, v in globals().items() if not k.startswith('_')}}
_grads, _ = getattr(_key, 'manual' + '_grads')(_values)
globals().update({{'d' + k: g for k, g in _grads.items()}})
"""

CORPUS = [
    Case(Sample("s01_reference", "the lecture's solutions")),
    Case(
        Sample(
            "s02_vectorised",
            "vectorised: scatter_ for the max, index_add_ for dC, keepdim dbnmeani",
            replace={"ex1_solution": VECTORISED_EX1, "ex4_solution": VECTORISED_EX4},
        )
    ),
    Case(
        Sample(
            "s03_onehot",
            "one-hot matmuls and constants of the student's own in an added cell",
            replace={
                "ex1_solution": ONEHOT_EX1,
                "ex2_solution": "dlogits = (F.softmax(logits, 1) - F.one_hot(Yb, V)) / N",
                "ex3_solution": "dhprebn = bngain * bnvar_inv / N * (N * dhpreact - dhpreact.sum(0) "
                "- N / (N - 1) * bnraw * (dhpreact * bnraw).sum(0))",
            },
            added=[("autograd", OWN_CONSTANTS)],
        )
    ),
    Case(
        Sample(
            "s04_bessel",
            "n instead of n-1 in dbndiff2",
            {"ex1_solution": [("dbndiff2 = (1.0/(n-1))*", "dbndiff2 = (1.0/n)*")]},
        ),
        zeros={"ex1_dbndiff2"},
        hints={"ex1_dbndiff2": "Bessel"},
        carried={"ex1_dbndiff", "ex1_dhprebn", "ex1_dembcat", "ex1_dW1", "ex1_demb", "ex1_dC"},
    ),
    Case(
        Sample(
            "s05_equals",
            "`=` instead of `+=` loses the counts_sum branch of dcounts",
            {
                "ex1_solution": [
                    (
                        "dcounts += torch.ones_like(counts) * dcounts_sum",
                        "dcounts = torch.ones_like(counts) * dcounts_sum",
                    )
                ]
            },
        ),
        zeros={"ex1_dcounts"},
        hints={"ex1_dcounts": "but not the part through `probs`"},
    ),
    Case(
        Sample(
            "s06_log",
            "log's derivative taken as x",
            {"ex1_solution": [("dprobs = (1.0 / probs) * dlogprobs", "dprobs = probs * dlogprobs")]},
        ),
        zeros={"ex1_dprobs"},
        hints={"ex1_dprobs": "derivative of log(x) is 1/x"},
    ),
    Case(
        Sample(
            "s07_tanh",
            "tanh's derivative taken as 1-h",
            {"ex1_solution": [("dhpreact = (1.0 - h**2) * dh", "dhpreact = (1.0 - h) * dh")]},
        ),
        zeros={"ex1_dhpreact"},
        hints={"ex1_dhpreact": "derivative of tanh is 1 - h**2"},
    ),
    Case(
        Sample(
            "s08_transposed",
            "dW2 transposed",
            {"ex1_solution": [("dW2 = h.T @ dlogits", "dW2 = dlogits.T @ h")]},
        ),
        zeros={"ex1_dW2"},
        hints={"ex1_dW2": "transposed"},
    ),
    Case(
        Sample(
            "s09_axis",
            "dcounts_sum_inv summed over the batch instead of the classes",
            {
                "ex1_solution": [
                    (
                        "dcounts_sum_inv = (counts * dprobs).sum(1, keepdim=True)",
                        "dcounts_sum_inv = (counts * dprobs).sum(0, keepdim=True)",
                    )
                ]
            },
        ),
        zeros={"ex1_dcounts_sum_inv"},
        hints={"ex1_dcounts_sum_inv": "summed over the wrong dimension"},
    ),
    Case(
        Sample(
            "s10_branch",
            "the bndiff2 branch of dbndiff is missing",
            {"ex1_solution": [("dbndiff += (2*bndiff) * dbndiff2\n", "")]},
        ),
        zeros={"ex1_dbndiff"},
        hints={"ex1_dbndiff": "but not the part through `bndiff2`"},
    ),
    Case(
        Sample(
            "s11_raises",
            "a line that raises: dh = dlogits @ W2 (shape mismatch)",
            {"ex1_solution": [("dh = dlogits @ W2.T", "dh = dlogits @ W2")]},
        ),
        zeros={"ex1_dh"},
        hints={"ex1_dh": "raised RuntimeError"},
    ),
    Case(
        Sample(
            "s12_alias",
            "dhprebn = dbndiff without .clone(): the += corrupts dbndiff",
            {"ex1_solution": [("dhprebn = dbndiff.clone()", "dhprebn = dbndiff")]},
        ),
        zeros={"ex1_dbndiff"},
        hints={"ex1_dbndiff": "same tensor in memory"},
    ),
    Case(
        Sample(
            "s13_loop_n",
            "a loop variable named n overwrites the batch size",
            {
                "ex1_solution": [
                    ("for k in range(Xb.shape[0]):", "for n in range(Xb.shape[0]):"),
                    ("ix = Xb[k,j]", "ix = Xb[n,j]"),
                    ("dC[ix] += demb[k,j]", "dC[ix] += demb[n,j]"),
                ]
            },
        ),
        zeros={"ex2_dlogits", "ex3_dhprebn"},
        hints={"ex2_dlogits": "`n` is 31", "ex3_dhprebn": "`n` is 31"},
    ),
    Case(
        Sample(
            "s14_two",
            "two mistakes: Bessel in dbndiff2 and tanh's derivative",
            {
                "ex1_solution": [
                    ("dbndiff2 = (1.0/(n-1))*", "dbndiff2 = (1.0/n)*"),
                    ("dhpreact = (1.0 - h**2) * dh", "dhpreact = (1.0 - h) * dh"),
                ],
                "ex3_solution": [("n/(n-1)*bnraw", "bnraw")],
            },
        ),
        zeros={"ex1_dbndiff2", "ex1_dhpreact", "ex3_dhprebn"},
        hints={"ex1_dbndiff2": "Bessel", "ex1_dhpreact": "1 - h**2", "ex3_dhprebn": "Bessel"},
    ),
    Case(
        Sample(
            "c01_copy_grad",
            "cheat: every answer copied from .grad",
            replace={
                "ex1_solution": COPY_GRAD,
                "ex2_solution": "dlogits = logits.grad.clone()",
                "ex3_solution": "dhprebn = hprebn.grad.clone()",
            },
        ),
        zeros=set(EX1) | {"ex2_dlogits", "ex3_dhprebn"},
        suspicious=True,
        hints={"ex1_dlogprobs": "raised AttributeError"},
    ),
    Case(
        Sample(
            "c02_autograd",
            "cheat: torch.autograd.grad on a recomputed forward pass",
            replace={"ex1_solution": AUTOGRAD_EX1},
        ),
        zeros=set(EX1),
        suspicious=True,
    ),
    Case(
        Sample(
            "c03_monkeypatch",
            "cheat: torch.allclose patched, zeros everywhere",
            replace={"ex1_solution": MONKEYPATCH_EX1},
        ),
        # db1 and dlogit_maxes are mathematically zero: zeros are right there
        zeros=set(EX1) - {"ex1_db1", "ex1_dlogit_maxes"},
        suspicious=True,
        hints={"ex1_dlogprobs": "all zeros"},
    ),
    Case(
        Sample(
            "c04_from_file",
            "cheat: answers saved from .grad in the kernel, loaded from a file",
            replace={"ex1_solution": LOAD_ANSWERS},
            added=[("autograd", SAVE_ANSWERS)],
        ),
        zeros=set(EX1),
        suspicious=True,
    ),
    Case(
        Sample(
            "c05_frames",
            "cheat: takes the correct values the replay's harness holds",
            replace={"ex1_solution": STEAL_FRAMES},
        ),
        # a run is only ever handed the gradients upstream of the one it judges
        zeros=set(EX1),
        suspicious=True,
    ),
    Case(
        Sample(
            "c06_answer_key",
            "cheat: imports the kit's backward rules, directly and obfuscated",
            replace={"ex1_solution": ANSWER_KEY},
        ),
        zeros=set(EX1),  # nothing of the key is importable inside the sandbox
        suspicious=True,
    ),
]


# every route to autograd (exact scores, the hint, listed), and autograd used honestly
CORPUS += [
    Case(
        Sample(student, f"autograd: {what}", replace={"ex1_solution": answer}),
        zeros,
        dict([hint] if hint else []),
        True,
    )
    for student, what, answer, zeros, hint in AUTOGRAD_CASES
] + [Case(HONEST_CHECKS)]

# What each demo student loses, worked out by hand: each gradient is judged on its own
# rule (a right rule that received a wrong upstream gradient keeps its points).
EXPECTED_ZEROS = {
    "alice": set(),
    "bob": {"ex1_dbndiff2", "ex3_dhprebn"},  # n instead of n-1, twice
    "carol": {"ex1_dcounts"},  # the counts_sum branch is lost
    # transposed dW2 (wrong shape); 1-h in exercise 4 breaks every gradient below tanh but
    # db1, which is zero whatever comes in (training still lowers the loss).
    "dave": {"ex1_dW2", "ex4_dC", "ex4_dW1", "ex4_dbngain", "ex4_dbnbias"},
    "erin": {g.grade_id for g in spec.GRADED},
}
