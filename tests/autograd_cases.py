"""Autograd in answers, by every route the kit knows (grader/sandboxed/autograd_guard.py), with the
exact scores each earns: no credit for a gradient autograd made. And the honest counterpart:
autograd used only to check one's work, in a cell of one's own, costs nothing."""

from __future__ import annotations

from grader.course.submissions import Sample
from grader.exercise import spec

from answers import VECTORISED_EX1

EX1 = [g for g in spec.GRADIENTS if g.exercise == 1]
TARGETS = [g.target for g in EX1]
PARAMS = ["C", "W1", "b1", "W2", "b2", "bngain", "bnbias"]

# The lecture's forward pass on leaves of the cheat's own, every step kept: autograd can then
# be asked for the gradient of every intermediate.
FORWARD = """
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

_P = [t.detach().clone().requires_grad_() for t in (C, W1, b1, W2, b2, bngain, bnbias)]
"""
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
# Around the kit's own check: the original grad-mode switch, taken out of the kit's wrapper
# of it, at the end of an honest answer. The replay stops there: nothing after it counts.
KEPT_ORIGINAL = f"""{honest_except([])}
{FORWARD}
_cells = getattr(torch._C._set_grad_enabled, '__closure__', None) or ()
_kept = [c.cell_contents for c in _cells if getattr(c.cell_contents, '__name__', '') == '_set_grad_enabled']
_on = (_kept or [torch._C._set_grad_enabled])[0]
_on(True)
dW1 = torch.autograd.grad(_forward(_P)['loss'], _P[1])[0]
_on(False)
"""
# Switching the profile hook off (refused: the run goes on, watched), then autograd; ctypes too.
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
EVERYTHING = {g.grade_id for g in spec.GRADED}
MADE, STOPPED = "computed with autograd", "worked around the kit's autograd check"


def ids(names: list[str]) -> set[str]:
    return {g.grade_id for g in EX1 if g.name in names}


# student, what it does, its exercise-1 answer, what gets 0, (a grade id, its hint)
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
    (
        "a06_kept_original",
        "around the check: the wrapper's own original",
        KEPT_ORIGINAL,
        EVERYTHING,
        ("ex1_dW2", STOPPED),
    ),
    ("a07_unhook", "sys.setprofile(None) and ctypes, refused", UNHOOK, ids(["dW2"]), ("ex1_dW2", MADE)),
]
HONEST_CHECKS = Sample(
    "a08_checks_with_autograd",
    "honest: autograd in a checking cell, no_grad and comments",
    replace={"ex1_solution": COMMENTED_EX1 + honest_except([])},
    added=[("ex1_solution", CHECK_CELL)],
)
