"""The student's own check (the notebook's locked `cmp` cell, shipped in the release): the
lecture's exact / approximate / maxdiff line, and for a gradient that does not match a
one-line hint from how it relates to autograd's, with a shape mismatch explained, not a crash."""

from __future__ import annotations

import nbformat
import pytest
import torch
import torch.nn.functional as F

from conftest import ROOT

N = 32


def _cmp_cell(folder: str) -> str:
    nb = nbformat.read(ROOT / folder / "backprop_ninja" / "backprop_ninja.ipynb", 4)
    return next(c.source for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "cmp")


@pytest.fixture(scope="module")
def cmp():
    ns = {"torch": torch, "n": N}
    exec(_cmp_cell("source"), ns)
    return ns["cmp"]


@pytest.fixture(scope="module")
def net():
    """A linear layer and a cross-entropy loss, with autograd's gradients, as in the lecture."""
    g = torch.Generator().manual_seed(1)
    h = torch.randn(N, 10, generator=g)
    W2 = torch.randn(10, 27, generator=g, requires_grad=True)
    b2 = torch.randn(27, generator=g, requires_grad=True)
    logits = h @ W2 + b2
    logits.retain_grad()
    Yb = torch.randint(0, 27, (N,), generator=g)
    F.cross_entropy(logits, Yb).backward()
    dlogits = F.softmax(logits.detach(), 1)
    dlogits[range(N), Yb] -= 1
    dlogits /= N
    return {"h": h, "W2": W2, "b2": b2, "logits": logits, "dlogits": dlogits, "Yb": Yb}


def _said(cmp, capsys, *args) -> str:
    cmp(*args)
    return capsys.readouterr().out


def test_the_release_ships_the_same_check():
    assert _cmp_cell("release") == _cmp_cell("source")


def test_a_right_gradient_gets_the_lectures_line_only(cmp, net, capsys):
    out = _said(cmp, capsys, "W2", net["h"].T @ net["dlogits"], net["W2"])
    assert out.startswith("W2              | exact: ") and "approximate: True " in out
    assert "hint" not in out and out.count("\n") == 1


@pytest.mark.parametrize(
    "wrong, expected",
    [
        (lambda d, h: d.T @ h, "transposed"),  # the shape (27, 10): no broadcasting error
        (lambda d, h: (h.T @ d) * N, "n times too big"),
        (lambda d, h: (h.T @ d) / N, "n times too small"),
        (lambda d, h: -(h.T @ d), "sign is flipped"),
        (lambda d, h: (h.T @ d) * N / (N - 1), "Bessel"),
    ],
)
def test_a_wrong_dW2_is_explained(cmp, net, capsys, wrong, expected):
    out = _said(cmp, capsys, "W2", wrong(net["dlogits"], net["h"]), net["W2"])
    assert out.startswith("W2 ")
    assert expected in out


def test_a_kept_dimension_and_a_missing_branch(cmp, net, capsys):
    # (1, 27) for (27,) compares as the lecture's broadcasting did: the lecture's dbnmeani is (64,)
    kept = _said(cmp, capsys, "b2", net["dlogits"].sum(0, keepdim=True), net["b2"])
    assert "approximate: True" in kept and "hint" not in kept
    assert "expected (27,)" in _said(cmp, capsys, "b2", net["dlogits"][:, :3].sum(0), net["b2"])
    assert "not a tensor" in _said(cmp, capsys, "b2", 0.0, net["b2"])
    # dlogits without the branch through the max (one place per row): the lecture's logit_maxes
    x = torch.randn(N, 27, requires_grad=True)
    (x * x.max(1, keepdim=True).values).sum().backward()
    one_branch = x.max(1, keepdim=True).values.detach().expand(N, 27)
    assert "branch is missing" in _said(cmp, capsys, "x", one_branch, x)
    # counts without the branch through counts_sum (the same in every row)
    c = torch.rand(N, 27, requires_grad=True)
    (c * c.sum(1, keepdim=True)).sum().backward()
    assert "branch is missing" in _said(cmp, capsys, "c", c.sum(1, keepdim=True).detach().expand(N, 27), c)


def test_the_checks_graph_is_the_forward_pass():
    """What the release's check knows of the backward order is the kit's own forward pass."""
    from grader.exercise import spec

    ns = {"torch": torch}
    exec(_cmp_cell("source"), ns)
    ex1 = [g.target for g in spec.GRADIENTS if g.exercise == 1]
    expected = {t: [c for c in spec.EXERCISE.consumers(t) if c != "loss"] for t in ex1}
    assert ns["_FEEDS"] == expected


def _chain():
    """x -> y -> z -> loss, with autograd's gradients; (x, y, z)."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(N, 4, generator=g, requires_grad=True)
    y = x * 3.0
    y.retain_grad()
    z = y.tanh()
    z.retain_grad()
    (z * torch.randn(N, 4, generator=g)).sum().backward()
    return x, y, z


def test_downstream_of_a_wrong_gradient_the_check_says_fix_that_first(capsys):
    ns = {"torch": torch, "n": N}
    exec(_cmp_cell("source"), ns)
    ns["_FEEDS"] = {"z": [], "y": ["z"], "x": ["y"]}
    run = iter(range(1, 100))
    ns["get_ipython"] = lambda: type("Shell", (), {"execution_count": current})()
    x, y, z = _chain()
    current = next(run)  # one run of the check cell: dz wrong, then dy and dx from it
    out = _said(ns["cmp"], capsys, "z", z.grad * 1.5, z)
    assert "fix that first" not in out
    for name, t in (("y", y), ("x", x)):
        out = _said(ns["cmp"], capsys, name, t.grad * 2.0, t)
        assert "this may be right: dz above is wrong" in out and "local derivative" not in out, out
    current = next(run)  # the next run: dz right now; a wrong dy is its own
    _said(ns["cmp"], capsys, "z", z.grad, z)
    out = _said(ns["cmp"], capsys, "y", y.grad * 7.0, y)
    assert "fix that first" not in out and "hint:" in out
    current = next(run)  # another cell (exercise 2's check) does not inherit exercise 1's results
    out = _said(ns["cmp"], capsys, "x", x.grad * 7.0, x)
    assert "fix that first" not in out


def test_a_sum_started_from_ones_is_off_by_exactly_one(cmp, net, capsys):
    out = _said(cmp, capsys, "W2", net["h"].T @ net["dlogits"] + 1.0, net["W2"])
    assert "off by exactly 1" in out and "zeros_like" in out
