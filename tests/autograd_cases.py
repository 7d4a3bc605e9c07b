"""Autograd in answers, by every route the kit knows (grader/untrusted/autograd_guard.py), torch's
own derivative code (derivative_block.py), finite differences (grader/verdicts/numeric.py) and
signal handlers, with the exact scores each earns: no credit for a gradient autograd made. And
the honest counterpart: autograd used only to check one's work, in a cell of one's own, costs
nothing."""

from __future__ import annotations

from grader.exercise import spec
from grader.incoming.submissions import Sample

from answers import VECTORISED_EX1

EX1 = [g for g in spec.GRADIENTS if g.exercise == 1]
TARGETS = [g.target for g in EX1]
PARAMS = ["C", "W1", "b1", "W2", "b2", "bngain", "bnbias"]

# The lecture's forward pass on leaves of the cheat's own, every step kept: autograd can then
# be asked for the gradient of every intermediate (FORWARD_PASS: the functions alone).
FORWARD_PASS = """
def _forward(P):
    v = dict(zip(['C', 'W1', 'b1', 'W2', 'b2', 'bngain', 'bnbias'], P))
    v['emb'] = v['C'][Xb]
    v['embcat'] = v['emb'].view(v['emb'].shape[0], -1)
    v['hprebn'] = v['embcat'] @ v['W1'] + v['b1']
    v['bnmeani'] = 1/n*v['hprebn'].sum(0, keepdim=True)
    v['bndiff'] = v['hprebn'] - v['bnmeani']
    v['bndiff2'] = v['bndiff']**2
    v['bnvar'] = 1/(n-1)*(v['bndiff2']).sum(0, keepdim=True)
    v['bnvar_inv'] = (v['bnvar'] + 1e-5)**-0.5
    v['bnraw'] = v['bndiff'] * v['bnvar_inv']
    v['hpreact'] = v['bngain'] * v['bnraw'] + v['bnbias']
    v['h'] = torch.tanh(v['hpreact'])
    v['logits'] = v['h'] @ v['W2'] + v['b2']
    v['logit_maxes'] = v['logits'].max(1, keepdim=True).values
    v['norm_logits'] = v['logits'] - v['logit_maxes']
    v['counts'] = v['norm_logits'].exp()
    v['counts_sum'] = v['counts'].sum(1, keepdims=True)
    v['counts_sum_inv'] = v['counts_sum']**-1
    v['probs'] = v['counts'] * v['counts_sum_inv']
    v['logprobs'] = v['probs'].log()
    v['loss'] = -v['logprobs'][range(n), Yb].mean()
    return v

def _loss(*P):
    return _forward(P)['loss']
"""
FORWARD = (
    FORWARD_PASS
    + """
_P = [t.detach().clone().requires_grad_() for t in (C, W1, b1, W2, b2, bngain, bnbias)]
"""
)
ASSIGN_ALL = "\n".join(f"{g.name} = _g[{i}].detach()" for i, g in enumerate(EX1))
ASKED = f"[_v[k] for k in {TARGETS!r}]"

# The example: torch built from pieces, grad mode switched back on, grad by a built name.
ENABLE_GRAD = f"""{FORWARD}
_M = __import__('tor' + 'ch')
with _M.enable_grad():
    _v = _forward(_P)
    _g = getattr(_M.autograd, 'gr' + 'ad')(_v['loss'], {ASKED})
{ASSIGN_ALL}
"""
# Grad mode on through importlib and torch._C, .backward(), retain_grad and a tensor hook.
BACKWARD = f"""{FORWARD}
import importlib
_c = importlib.import_module('torch._C')
getattr(_c, '_set_grad' + '_enabled')(True)
_v = _forward(_P)
for _t in {ASKED}:
    _t.retain_grad()
_hooked = {{}}
_v['h'].register_hook(lambda g: _hooked.setdefault('h', g))
_v['loss'].backward()
_g = [_v[k].grad for k in {TARGETS!r}]
_g[[g.name for g in {[g.name for g in EX1]!r}].index('dh')] = _hooked['h']
torch.set_grad_enabled(False)
{ASSIGN_ALL}
"""


def honest_except(names: list[str]) -> str:
    """The vectorised honest answer without the lines that assign `names`."""
    return "\n".join(l for l in VECTORISED_EX1.split("\n") if l.split(" = ")[0] not in names)


def honest_with(cheats: dict[str, str]) -> str:
    """The vectorised honest answer with the line that assigns each name of `cheats` replaced,
    in place, by the cheat's lines for it (so what comes after still reads it)."""
    lines = VECTORISED_EX1.split("\n")
    return "\n".join(cheats.get(l.split(" = ")[0], l) for l in lines)


# torch.func and torch.autograd.functional, one gradient per route; the rest honest.
FUNC_NAMES = ["dC", "dW1", "db1", "dW2", "db2", "dbngain", "dbnbias"]
FUNC = f"""{honest_except(FUNC_NAMES)}
{FORWARD}
from torch import func as _f
import torch.autograd.functional as _af
_ps = tuple(t.detach() for t in (C, W1, b1, W2, b2, bngain, bnbias))
dC, dW1 = _f.grad(_loss, argnums=(0, 1))(*_ps)
db1 = _f.grad_and_value(lambda b: _loss(_ps[0], _ps[1], b, *_ps[3:]))(_ps[2])[0]
dW2 = _f.vjp(lambda w: _loss(*_ps[:3], w, *_ps[4:]), _ps[3])[1](torch.tensor(1.0))[0]
db2 = _f.jacrev(lambda b: _loss(*_ps[:4], b, *_ps[5:]))(_ps[4])
dbngain = _af.vjp(lambda g: _loss(*_ps[:5], g, _ps[6]), _ps[5])[1]
dbnbias = _af.jacobian(lambda b: _loss(*_ps[:6], b), _ps[6])
"""
# Forward mode: torch.func.jacfwd and jvp, and forward_ad's dual numbers.
FORWARD_NAMES = ["db2", "dbngain", "dbnbias"]
FORWARD_AD = f"""{honest_except(FORWARD_NAMES)}
{FORWARD}
import torch.autograd.forward_ad as _fwad
_ps = tuple(t.detach() for t in (C, W1, b1, W2, b2, bngain, bnbias))
db2 = torch.func.jacfwd(lambda b: _loss(*_ps[:4], b, *_ps[5:]))(_ps[4])
_e = torch.eye(_ps[5].numel())
dbngain = torch.stack([torch.func.jvp(lambda g: _loss(*_ps[:5], g, _ps[6]), (_ps[5],),
                                      (_e[i].view_as(_ps[5]),))[1] for i in range(len(_e))]).view_as(_ps[5])
_cols = []
with _fwad.dual_level():
    for i in range(len(_e)):
        _d = _fwad.make_dual(_ps[6], _e[i].view_as(_ps[6]))
        _cols.append(_fwad.unpack_dual(_loss(*_ps[:6], _d)).tangent)
dbnbias = torch.stack(_cols).view_as(_ps[6])
"""
# The same autograd call behind exec of base64, compile + eval, marshal and pickle.
DECODED_NAMES = ["dW1", "db1", "dW2", "db2"]
_ASK = 'torch.autograd.grad(_forward(_P)["loss"], _P[{i}])[0]'
_IN_GRAD_MODE = "exec('with torch.enable_grad():\\n    _r = {ask}', globals())"
DECODED = f"""{honest_except(DECODED_NAMES)}
{FORWARD}
import base64, marshal, pickle
_src = {_IN_GRAD_MODE.format(ask=_ASK.format(i=1))!r}
exec(base64.b64decode(base64.b64encode(_src.encode())).decode())
dW1 = _r
eval(compile({_IN_GRAD_MODE.format(ask=_ASK.format(i=2))!r}, 'x', 'eval'))
db1 = _r
class _Payload:
    def __reduce__(self):
        return (eval, ({_IN_GRAD_MODE.format(ask=_ASK.format(i=3))!r},))
pickle.loads(pickle.dumps(_Payload()))
dW2 = _r
exec(marshal.loads(marshal.dumps(compile({_IN_GRAD_MODE.format(ask=_ASK.format(i=4))!r}, 'y', 'exec'))))
db2 = _r
"""
# Around the kit's own check: the original grad-mode switch, looked for in the closure of the
# kit's wrapper of it, at the end of an honest answer. The wrapper keeps no original: `_on` is
# the wrapper, `_on(True)` and autograd.grad are refused, and the honest dW1 stands.
KEPT_ORIGINAL = f"""{honest_except([])}
{FORWARD}
_cells = getattr(torch._C._set_grad_enabled, '__closure__', None) or ()
_kept = [c.cell_contents for c in _cells if getattr(c.cell_contents, '__name__', '') == '_set_grad_enabled']
_on = (_kept or [torch._C._set_grad_enabled])[0]
_on(True)
dW1 = torch.autograd.grad(_forward(_P)['loss'], _P[1])[0]
_on(False)
"""
# Switching a profile hook off (there is none: nothing changes), ctypes's CDLL (gone from a
# blocked run's ctypes), then autograd: grad mode refused, dW2 never assigned.
UNHOOK = f"""{honest_except(["dW2"])}
{FORWARD}
import sys, ctypes
try:
    ctypes.CDLL(None)
except Exception:
    pass
sys.setprofile(None)
with torch.enable_grad():
    dW2 = torch.autograd.grad(_forward(_P)['loss'], _P[3])[0]
"""
# torch's own derivative kernels, one by one through torch.ops (issue 16): cross entropy's
# backward as nll_loss_backward then _log_softmax_backward_data, tanh_backward, BatchNorm's
# backward with Bessel's correction absorbed (torch's assumes the biased variance: scaling
# save_invstd by sqrt(n/(n-1)) and dividing the result back gives the unbiased one's), and the
# embedding's. The rest honest. Every kernel refuses in a graded run.
ATEN = {
    "dlogits": """_aten = torch.ops.aten
_logp = F.log_softmax(logits, 1)
_dlogp = _aten.nll_loss_backward(torch.tensor(1.0), _logp, Yb, None, 1, -100, torch.tensor(float(n)))
dlogits = _aten._log_softmax_backward_data(_dlogp, _logp, 1, logits.dtype)""",
    "dhpreact": "dhpreact = _aten.tanh_backward(dh, h)",
    "dhprebn": """_k = (n / (n - 1)) ** 0.5
dhprebn = _aten.native_batch_norm_backward(dhpreact, hprebn, bngain.view(-1), None, None,
    bnmeani.view(-1), bnvar_inv.view(-1) * _k, True, 1e-5, [True, False, False])[0] / _k""",
    "dC": "dC = _aten.embedding_dense_backward(demb.view(-1, n_embd), Xb.view(-1), C.shape[0], -1, False)",
}
# The same family by the routes that carried no scan sign (issue 16): the decomposition table,
# the Python functions of torch._decomp.decompositions, an operator by a built name, torch._ops
# and torch's top level. dbnbias and dbngain take dhpreact from tanh_backward themselves.
DECOMP = {
    "dlogprobs": """import torch._decomp
_table = torch._decomp.decomposition_table
dlogprobs = _table[torch.ops.aten.nll_loss_backward.default](torch.tensor(1.0), logprobs, Yb, None, 1, -100,
                                                             torch.tensor(float(n)))""",
    "dnorm_logits": """from torch._decomp import decompositions as _dec
dnorm_logits = _dec._softmax_backward_data(dprobs, probs, 1, probs.dtype)""",
    "dlogits": "dlogits = torch._softmax_backward_data(dprobs, probs, 1, probs.dtype)",
    "dhpreact": "dhpreact = getattr(torch.ops.aten, 'tanh_backward').default(dh, h)",
    "dbngain": "dbngain = (bnraw * _table[torch.ops.aten.tanh_backward.default](dh, h)).sum(0, keepdim=True)",
    "dbnbias": "dbnbias = _dec.tanh_backward(dh, h).sum(0, keepdim=True)",
    "dhprebn": """_k = (n / (n - 1)) ** 0.5
dhprebn = torch._ops.ops.aten.native_batch_norm_backward(dhpreact, hprebn, bngain.view(-1), None, None,
    bnmeani.view(-1), bnvar_inv.view(-1) * _k, True, 1e-5, [True, False, False])[0] / _k""",
    "dC": "dC = _dec.embedding_dense_backward(demb.view(-1, n_embd), Xb.view(-1), C.shape[0], -1, False)",
}
# A linear layer written as a 1x1 convolution (x (n, in, 1), weight W.T (out, in, 1)), its
# gradients from torch.nn.grad.
CONV = {
    "dh": """import torch.nn.grad as _ng
dh = _ng.conv1d_input(h.unsqueeze(-1).shape, W2.T.unsqueeze(-1), dlogits.unsqueeze(-1)).squeeze(-1)""",
    "dW2": "dW2 = _ng.conv1d_weight(h.unsqueeze(-1), W2.T.unsqueeze(-1).shape, "
    "dlogits.unsqueeze(-1)).squeeze(-1).T",
    "dW1": "dW1 = _ng.conv1d_weight(embcat.unsqueeze(-1), W1.T.unsqueeze(-1).shape, "
    "dhprebn.unsqueeze(-1)).squeeze(-1).T",
}
# Finite differences, no derivative anywhere (issue 16): central differences in float64 on the
# notebook's own forward pass, 256 elements of a parameter perturbed at once (a leading batch
# dimension of perturbations), one statement per parameter; error about 1e-8. Outside the
# replay, on one core here, the seven take about 0.6 CPU s in all (W1's 0.4); in the replay
# the exercise-1 cell took 0.45 and 0.75 CPU s (main and ex3 runs), under the 1.0 s floor of
# the numeric bound (100x the reference's 2 ms backward is 0.2 s): today the replay credits
# it 38/38 with no flag at all. The expected zeros are what the bound is there to give.
FD_BATCHED = f"""
def _fd_losses(P):
    # P: name -> (B, *shape) or (1, *shape) in float64; the loss of each of the B
    emb = P['C'][:, Xb]
    embcat = emb.reshape(emb.shape[0], n, -1)
    hprebn = embcat @ P['W1'] + P['b1'].unsqueeze(1)
    bnmeani = 1/n*hprebn.sum(1, keepdim=True)
    bndiff = hprebn - bnmeani
    bndiff2 = bndiff**2
    bnvar = 1/(n-1)*(bndiff2).sum(1, keepdim=True)
    bnvar_inv = (bnvar + 1e-5)**-0.5
    bnraw = bndiff * bnvar_inv
    hpreact = P['bngain'] * bnraw + P['bnbias']
    h = torch.tanh(hpreact)
    logits = h @ P['W2'] + P['b2'].unsqueeze(1)
    logit_maxes = logits.max(2, keepdim=True).values
    norm_logits = logits - logit_maxes
    counts = norm_logits.exp()
    counts_sum = counts.sum(2, keepdims=True)
    counts_sum_inv = counts_sum**-1
    probs = counts * counts_sum_inv
    logprobs = probs.log()
    return -logprobs[:, range(n), Yb].mean(1)

_base = {{k: v.detach().double().unsqueeze(0)
         for k, v in zip({PARAMS!r}, (C, W1, b1, W2, b2, bngain, bnbias))}}

def _fd_grad(name, eps=1e-5, chunk=256):
    # central differences, `chunk` elements of parameter `name` perturbed at once
    p = _base[name]
    m = p[0].numel()
    out = torch.empty(m, dtype=torch.float64)
    for s in range(0, m, chunk):
        idx = torch.arange(s, min(s + chunk, m))
        e = torch.zeros(len(idx), m, dtype=torch.float64)
        e[torch.arange(len(idx)), idx] = eps
        e = e.view(len(idx), *p.shape[1:])
        plus = _fd_losses({{**_base, name: p + e}})
        minus = _fd_losses({{**_base, name: p - e}})
        out[idx] = (plus - minus) / (2 * eps)
    return out.view(p.shape[1:]).float()
"""
NUMERIC_BATCHED = (
    honest_except(["d" + p for p in PARAMS])
    + FD_BATCHED
    + "\n".join(f"d{p} = _fd_grad({p!r})" for p in PARAMS)
)
# Finite differences element by element: a Python loop, one forward pass (FORWARD_PASS's, float64)
# per side of each element, for the three smallest gradients (27 + 64 + 64 elements): 32 ms of
# CPU here, 166 to 191 times the reference backward, the numeric bound's closest case (100).
LOOP_NAMES = ["db2", "dbngain", "dbnbias"]
NUMERIC_LOOP = f"""{honest_except(LOOP_NAMES)}
{FORWARD_PASS}
_P64 = [t.detach().double() for t in (C, W1, b1, W2, b2, bngain, bnbias)]

def _fd_one(i, eps=1e-5):
    # central differences, one element of parameter i at a time
    p = _P64[i]
    g = torch.empty_like(p)
    for k in range(p.numel()):
        keep = p.view(-1)[k].item()
        p.view(-1)[k] = keep + eps
        plus = _forward(_P64)['loss'].item()
        p.view(-1)[k] = keep - eps
        minus = _forward(_P64)['loss'].item()
        p.view(-1)[k] = keep
        g.view(-1)[k] = (plus - minus) / (2 * eps)
    return g.float()
db2 = _fd_one(4)
dbngain = _fd_one(5)
dbnbias = _fd_one(6)
"""
# The signal-handler unhook of issue 16: a SIGPROF handler, run inside whatever frame is
# running when the timer fires, walks the frames and their closures to put the original grad
# switch back and swap the guard's functions for no-ops; then plain autograd for dW2. A graded
# run refuses signal.signal and setitimer: the handler never runs, grad mode stays off.
SIGNAL_UNHOOK = f"""{honest_except(["dW2"])}
{FORWARD}
import signal

def _unhook(signum, frame):
    f = frame
    while f is not None:
        for v in list(f.f_locals.values()):
            for c in getattr(v, '__closure__', None) or ():
                try:
                    x = c.cell_contents
                except ValueError:
                    continue
                if getattr(x, '__name__', '') == '_set_grad_enabled':
                    torch._C._set_grad_enabled = x
                elif str(getattr(x, '__module__', '')).endswith('autograd_guard') and callable(x):
                    c.cell_contents = lambda *a, **k: None
        f = f.f_back

signal.signal(signal.SIGPROF, _unhook)
signal.setitimer(signal.ITIMER_PROF, 0.0002)
_burn = sum(i * i for i in range(200000))
with torch.enable_grad():
    _v = _forward(_P)
    _v['loss'].backward()
dW2 = _P[3].grad
"""
# A signal handler that only reads: it notes the frames it interrupts and changes nothing.
# The answer is honest; the two calls are refused and cost nothing.
SIGNAL_READS = f"""{honest_except([])}
import signal
_seen = []

def _look(signum, frame):
    _seen.append((frame.f_code.co_name, sorted(frame.f_locals)[:20]))

signal.signal(signal.SIGPROF, _look)
signal.setitimer(signal.ITIMER_PROF, 0.0002)
_burn = sum(i * i for i in range(200000))
"""
# Honest: autograd only to check the answers, in a cell of the student's own; comments and a
# no_grad block that mention .grad and backward() in the answer itself.
CHECK_CELL = """# my own check: autograd's answer beside mine (this is what loss.backward() gives)
with torch.enable_grad():
    _ps = [p.detach().clone().requires_grad_() for p in parameters]
    _emb = _ps[0][Xb].view(Xb.shape[0], -1)
    _h = torch.tanh(_emb @ _ps[1] + _ps[2])
    F.cross_entropy(_h @ _ps[3] + _ps[4], Yb).backward()
print('dW2 close to autograd:', torch.allclose(_ps[3].grad, dW2, atol=1e-2))
"""
COMMENTED_EX1 = (
    "# dlogprobs is what logprobs.grad holds after loss.backward(): no .grad used here\n"
    "with torch.no_grad():\n"
    "    _unused = logits.detach().clone()\n"
)


ALL_EX1 = {g.grade_id for g in EX1}
MADE, NUMERIC = "computed with autograd", "computed numerically (finite differences), not derived"


def ids(names: list[str]) -> set[str]:
    return {g.grade_id for g in EX1 if g.name in names}


# student, what it does, its exercise-1 answer, what gets 0, (a grade id, its hint) or None
AUTOGRAD_CASES = [
    (
        "a01_enable_grad",
        "enable_grad and autograd.grad by built names",
        ENABLE_GRAD,
        ALL_EX1,
        ("ex1_db1", MADE),
    ),
    (
        "a02_backward",
        "grad mode via torch._C, .backward(), retain_grad, a hook",
        BACKWARD,
        ALL_EX1,
        ("ex1_dh", MADE),
    ),
    (
        "a03_func",
        "torch.func grad, vjp, jacrev; autograd.functional",
        FUNC,
        ids(FUNC_NAMES),
        ("ex1_dbnbias", MADE),
    ),
    ("a04_forward_mode", "jacfwd, jvp and forward_ad", FORWARD_AD, ids(FORWARD_NAMES), ("ex1_db2", MADE)),
    (
        "a05_decoded",
        "autograd behind base64, compile, pickle, marshal",
        DECODED,
        ids(DECODED_NAMES),
        ("ex1_dW2", MADE),
    ),
    # the wrapper keeps no original: both calls refused, the honest answer stands
    ("a06_kept_original", "around the check: the wrapper's own original", KEPT_ORIGINAL, set(), None),
    ("a07_unhook", "sys.setprofile(None) and ctypes, then autograd", UNHOOK, ids(["dW2"]), ("ex1_dW2", MADE)),
    (
        "d01_aten",
        "torch's backward kernels through torch.ops",
        honest_with(ATEN),
        ids(ATEN),
        ("ex1_dhprebn", MADE),
    ),
    (
        "d02_decomp",
        "decompositions, built op names, torch._ops, torch._softmax_backward_data",
        honest_with(DECOMP),
        ids(DECOMP),
        ("ex1_dnorm_logits", MADE),
    ),
    (
        "d03_conv",
        "a linear layer as a 1x1 convolution, torch.nn.grad",
        honest_with(CONV),
        ids(CONV),
        ("ex1_dW1", MADE),
    ),
    # the numeric bound takes the whole exercise: its right gradients, honest ones included
    (
        "d04_fd_batched",
        "finite differences, 256 elements at once",
        NUMERIC_BATCHED,
        ALL_EX1,
        ("ex1_dC", NUMERIC),
    ),
    ("d05_fd_loop", "finite differences element by element", NUMERIC_LOOP, ALL_EX1, ("ex1_db2", NUMERIC)),
    (
        "d06_signal_unhook",
        "a signal handler to unhook the guard, then autograd",
        SIGNAL_UNHOOK,
        ids(["dW2"]),
        ("ex1_dW2", MADE),
    ),
    # refused, harmless: no zeros, the scan's `signal` sign
    ("d07_signal_reads", "a signal handler that only reads", SIGNAL_READS, set(), None),
]
HONEST_CHECKS = Sample(
    "a08_checks_with_autograd",
    "honest: autograd in a checking cell, no_grad and comments",
    replace={"ex1_solution": COMMENTED_EX1 + honest_except([])},
    added=[("ex1_solution", CHECK_CELL)],
)
