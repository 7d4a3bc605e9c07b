"""The second assignment, a GPT block (grader/exercise/definitions/gpt_block.py), in-process: its
forward pass is the block torch's own modules compute (layer_norm, causal scaled-dot-product
attention, tanh-GELU, cross_entropy), its shapes are llm.c's, its instructor's solution (every
gradient by hand, llm.c's backward functions line by line) equals autograd's, and its notebook's
cells give every point to that solution."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from grader.authoring.check import problems, run_notebook_code
from grader.authoring.notebook import instructor_notebook
from grader.authoring.train import train
from grader.exercise.definitions.gpt_block import GPT_BLOCK as GPT
from grader.exercise.graded import GradedExercise

from authored_cells import run_cells


@pytest.fixture(scope="module")
def folder(names_folder):
    return names_folder


@pytest.fixture(scope="module")
def ns(folder):
    return run_notebook_code(GPT, folder)[0]  # the namespace


def test_the_forward_is_the_block_torchs_modules_compute(ns):
    v = {k: ns[k].detach() for k in GPT.params}
    C, V = ns["C"], ns["vocab_size"]
    x = v["wte"][ns["Xb"]] + v["wpe"]
    h = F.layer_norm(x, (C,), v["ln1w"], v["ln1b"], eps=1e-5)
    x = (
        x
        + F.scaled_dot_product_attention(h @ v["Wq"], h @ v["Wk"], h @ v["Wv"], is_causal=True) @ v["Wo"]
        + v["bo"]
    )
    h = F.layer_norm(x, (C,), v["ln2w"], v["ln2b"], eps=1e-5)
    x = x + F.gelu(h @ v["Wfc"] + v["bfc"], approximate="tanh") @ v["Wproj"] + v["bproj"]
    logits = F.layer_norm(x, (C,), v["lnfw"], v["lnfb"], eps=1e-5) @ v["wte"].T
    assert torch.allclose(ns["logits"], logits, atol=1e-5)
    assert torch.allclose(ns["loss"], F.cross_entropy(logits.view(-1, V), ns["Yb"].view(-1)), atol=1e-6)
    B, T = ns["B"], ns["T"]
    assert ns["att"].shape == (B, T, T) and ns["x2"].shape == (B, T, C) and ns["fc"].shape == (B, T, 4 * C)
    assert (ns["att"].triu(1) == 0).all()  # causal: no weight on the future


def test_what_derives_from_the_forward_pass():
    order = GPT.backward_order()
    assert (
        len(GPT.steps) == 43
        and len(order) == 59
        and set(order) == {s.name for s in GPT.steps[:-1]} | set(GPT.params)
    )
    assert GPT.consumers("wte") == ["tok_emb", "logits"]  # tied: two branches, as llm.c adds them
    assert GPT.consumers("x1") == ["ln2mean", "ln2diff", "x2"] and GPT.consumers("ln1") == ["q", "k", "v"]
    assert [s.name for s in GPT.segment(GPT.in_one_go[1])] == ["scaled", "masked", "att", "attv"]
    one_go = [(g.grade_id, g.points) for g in GPT.gradients() if g.exercise in (2, 3)]
    assert one_go == [("ex2_dx2", 2.0), ("ex3_dscores", 2.0)]
    ex4 = [g.target for g in GPT.gradients() if g.exercise == 4]  # manual_backward's, as it returns them
    assert ex4 == list(GPT.params) and GradedExercise.written(GPT).total_points() == 59 + 4 + 17 + 1


def test_the_instructors_solution_is_autograds(folder):
    assert problems(GPT, folder) == []


def test_the_notebook_gives_the_solution_every_point(folder, monkeypatch):
    monkeypatch.chdir(folder)
    scores, said = run_cells(instructor_notebook(GPT))
    assert scores == {g.grade_id: g.points for g in GradedExercise.written(GPT).graded} and len(scores) == 79
    assert "approximate: False" not in said


def test_the_hand_written_backward_trains_the_block(folder):
    run = train(GPT, folder, steps=300, lr=0.3)
    assert run.losses[0] > 3.9 and run.mean_loss(50) < 2.9  # from above ln(27) = 3.3 to well below it
