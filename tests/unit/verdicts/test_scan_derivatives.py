"""grader/verdicts/scan_rules.py through scan.py: torch's own derivative code (its backward and
forward-AD ops, torch._decomp, torch._refs, torch.nn.grad, gradcheck) is an "autograd" sign, the
signal module a "tampering" one; the student's own names that look alike are no sign (issue 16)."""

from __future__ import annotations

import pytest

from grader.verdicts.scan import scan_source

DERIVATIVE_OPS = [
    ("dh = torch.ops.aten.tanh_backward.default(dh, h)", "uses torch's derivative op tanh_backward"),
    ("f = getattr(torch.ops.aten, 'tanh_backward').default", "uses torch's derivative op tanh_backward"),
    (
        "g = torch._softmax_backward_data(g, out, 1, torch.float32)",
        "uses torch's derivative op _softmax_backward_data",
    ),
    (
        "g = torch._C._nn.nll_loss_backward(g, x, y, None, 1, -100, t)",
        "uses torch's derivative op nll_loss_backward",
    ),
    ("g = aten.native_batch_norm_backward(*a)", "uses torch's derivative op native_batch_norm_backward"),
    (
        "g = torch._ops.ops.aten.native_batch_norm_backward(*a)",
        "uses torch's derivative op native_batch_norm_backward",
    ),
    (
        "g = torch.ops.aten._log_softmax_backward_data(*a)",
        "uses torch's derivative op _log_softmax_backward_data",
    ),
    (
        "g = torch.ops.aten.embedding_dense_backward(*a)",
        "uses torch's derivative op embedding_dense_backward",
    ),
    ("d = torch._make_dual(x, t, level=0)", "uses torch's derivative op _make_dual"),
    ("p, t = torch._unpack_dual(d, 0)", "uses torch's derivative op _unpack_dual"),
    ("g = torch.ops.aten.glu_jvp(*a)", "uses torch's derivative op glu_jvp"),
    (
        "from torch import _softmax_backward_data",
        "imports torch's derivative op torch._softmax_backward_data",
    ),
    (
        "from torch._C._nn import nll_loss_backward as nb",
        "imports torch's derivative op torch._C._nn.nll_loss_backward",
    ),
    (
        'op = torch._C._jit_get_operation("aten::tanh_backward")',
        "uses torch's derivative op aten::tanh_backward",
    ),
    ('op = torch.ops.aten.__getattr__("tanh_backward")', "uses torch's derivative op tanh_backward"),
    # torch's Python-level derivative helpers
    ("import torch._decomp", "imports torch._decomp"),
    ("from torch._decomp import decomposition_table", "imports torch._decomp"),
    ("t = torch._decomp.decomposition_table", "uses torch._decomp"),
    ("f = decomp.decomposition_table[op]", "uses torch._decomp"),
    ("from torch._decomp.decompositions import tanh_backward", "imports torch._decomp.decompositions"),
    ("g = torch._decomp.decompositions.tanh_backward(dh, h)", "uses torch._decomp"),
    ("import torch._refs", "imports torch._refs"),
    ("y = torch._refs.tanh(x)", "uses torch._refs"),
    ("dh = torch.nn.grad.conv1d_input(s, w, g)", "uses torch.nn.grad"),
    ("dW = nn.grad.conv1d_weight(x, s, g)", "uses torch.nn.grad"),
    ("from torch.nn import grad", "imports torch.nn.grad"),
    ("import torch.nn.grad as G", "imports torch.nn.grad"),
    ("importlib.import_module('torch._decomp')", "imports torch._decomp"),
    # torch's own finite differences
    ("ok = torch.autograd.gradcheck(f, (x,))", "uses torch's finite differences (gradcheck)"),
    ("J = gc.get_numerical_jacobian(f, x)", "uses torch's finite differences (gradcheck)"),
    ("from torch.autograd.gradcheck import get_numerical_jacobian", "imports torch.autograd.gradcheck"),
    ("from torch import autograd", "imports torch.autograd"),
]


@pytest.mark.parametrize("source,what", DERIVATIVE_OPS, ids=[c[0][:50] for c in DERIVATIVE_OPS])
def test_torchs_derivative_code_is_autograd(source, what):
    found = scan_source("ex1_solution", source)
    assert (what, "autograd") in [(f.what, f.kind) for f in found], [(f.what, f.kind) for f in found]
    assert all(f.serious and f.line == 1 for f in found)


def test_a_star_import_does_not_hide_the_op():
    found = scan_source("ex2_solution", "from torch._C._nn import *\ndlogits = nll_loss_backward(g, x, y)")
    assert [(f.line, f.what, f.kind) for f in found] == [
        (2, "uses torch's derivative op nll_loss_backward", "autograd")
    ]


def test_one_finding_per_sign_and_line():
    found = scan_source("ex4_solution", "t = torch._decomp.decomposition_table")
    assert [f.what for f in found] == ["uses torch._decomp"]


SIGNAL = [
    ("import signal", "imports signal"),
    ("import _signal", "imports _signal"),
    ("from signal import setitimer, SIGPROF", "imports signal"),
    ("signal.signal(SIGPROF, h)", "uses the signal module (signal.signal)"),
    ("signal.setitimer(ITIMER_PROF, 0.0002)", "uses the signal module (signal.setitimer)"),
    ("signal.set_wakeup_fd(fd)", "uses the signal module (signal.set_wakeup_fd)"),
    ("signal.pthread_kill(t, 27)", "uses the signal module (signal.pthread_kill)"),
    ("s = __import__('signal')", "imports signal"),
    ("s = __import__('signal'); s.setitimer(2, 1e-4)", "uses the signal module (s.setitimer)"),
    ("h = getattr(signal, 'signal')", "uses the signal module (signal)"),
]


@pytest.mark.parametrize("source,what", SIGNAL, ids=[c[0][:50] for c in SIGNAL])
def test_the_signal_module_is_tampering_anywhere(source, what):
    found = scan_source("your cell after ex1_solution", source)  # a checking cell of the student's
    assert (what, "tampering") in [(f.what, f.kind) for f in found], [(f.what, f.kind) for f in found]
    assert all(f.serious for f in found)


HONEST = {
    "own_variable": "dlogits_backward = dlogits.clone()\ndlogits_backward /= n\nprint(dlogits_backward)",
    "own_function": "def my_backward(x):\n    return 1 - x**2\ndh = my_backward(h) * dh_out",
    "own_method": "class L:\n    def my_backward(self, g):\n        return g\ndx = L().my_backward(g)",
    "own_attribute": "box.dh_backward = dh\ndx = box.dh_backward",
    "own_argument": "def step(h_backward):\n    return h_backward * 2",
    "own_jvp": "def my_jvp(x):\n    return x\ny = my_jvp(x)",
    "own_gradcheck": "def gradcheck(f, x):\n    return f(x)\ngradcheck(f, x)",
    "own_signal": "def f(signal):\n    return signal.mean()\nsignal = x - x.mean()\nsignal.std()",
    "manual_backward": "grads = manual_backward(Xb=Xb, Yb=Yb)",
    "words": '# torch.ops.aten.tanh_backward, torch._decomp, signal.setitimer\nprint("tanh_backward")',
    "a_file_named_so": "torch.save(dh, 'my_backward.pt')",
    "conv_forward": "y = F.conv1d(x, w)\nz = torch.nn.functional.conv2d(x, w)",
    "torch_functional": "import torch.functional\ny = torch.functional.einsum('ij->i', x)",
}


@pytest.mark.parametrize("source", HONEST.values(), ids=HONEST.keys())
def test_the_students_own_names_are_no_sign(source):
    found = scan_source("ex1_solution", source)
    assert found == [], [f.text() for f in found]


def test_a_name_another_cell_binds_is_the_students():
    assert scan_source("ex2_solution", "dlogits = dlogits_backward / n", {"dlogits_backward"}) == []
    found = scan_source("ex2_solution", "dlogits = dlogits_backward / n")  # bound nowhere: torch's
    assert [f.what for f in found] == ["uses torch's derivative op dlogits_backward"]


def test_an_own_name_does_not_cover_torchs():
    source = "def tanh_backward(g, h):\n    return g\ndh = torch.ops.aten.tanh_backward(dh, h)"
    assert [(f.line, f.kind) for f in scan_source("ex1_solution", source)] == [(3, "autograd")]


def test_backward_is_still_autograds_own_rule():
    found = scan_source("ex1_solution", "loss.backward()")
    assert [(f.what, f.kind) for f in found] == [("calls .backward()", "autograd")]
