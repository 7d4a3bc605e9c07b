"""grader/exercise/definition.py in-process: what derives from a forward pass alone. Backprop
Ninja's definition gives the lecture's exercises exactly (the grade ids are a public interface:
the list is spelled out here), the notebook's forward cell is its steps, the step rules read
what its steps read; and a third exercise of a dozen lines gets its order and gradients."""

from __future__ import annotations

import ast
import json

import torch

from grader.exercise import spec
from grader.exercise.definitions import names
from grader.exercise.definitions.backprop_ninja import BACKPROP_NINJA as NINJA
from grader.reference.backprop_ninja import rules

from conftest import ROOT
from tiny_exercise import TINY

# The grade ids and points TAs' gradebooks hold: never changed by a refactoring.
EX1_TENSORS = [
    *("logprobs", "probs", "counts_sum_inv", "counts_sum", "counts", "norm_logits", "logit_maxes"),
    *("logits", "h", "W2", "b2", "hpreact", "bngain", "bnraw", "bnbias", "bnvar_inv", "bnvar"),
    *("bndiff2", "bndiff", "bnmeani", "hprebn", "embcat", "W1", "b1", "emb", "C"),
]
GRADEBOOK = (
    [f"ex1_d{t}:1" for t in EX1_TENSORS]
    + ["ex2_dlogits:2", "ex3_dhprebn:2"]
    + [f"ex4_d{p}:1" for p in ["C", "W1", "b1", "W2", "b2", "bngain", "bnbias"]]
    + ["ex4_training:1"]
)


def test_the_lectures_exercises_derive_from_its_forward_pass():
    assert [f"{g.grade_id}:{g.points:g}" for g in spec.GRADED] == GRADEBOOK
    assert NINJA.backward_order() == [g.target for g in spec.GRADIENTS if g.exercise == 1]


def test_what_each_step_reads_is_what_its_rule_backpropagates_to():
    assert {s.out: s.inputs for s in rules.STEPS} == NINJA.inputs
    for name in NINJA.backward_order():
        assert NINJA.consumers(name) == spec.EXERCISE.consumers(name), name
    assert NINJA.consumers("logits") == ["logit_maxes", "norm_logits"]  # two branches
    assert NINJA.consumers("bndiff") == ["bndiff2", "bnraw"]


def test_the_notebooks_forward_cell_is_the_definitions_steps():
    nb = json.loads((ROOT / "source" / spec.ASSIGNMENT / f"{spec.NOTEBOOK}.ipynb").read_text())
    cell = next(c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == "forward")
    body = ast.parse("".join(cell["source"])).body
    assert [(a.targets[0].id, ast.unparse(a.value)) for a in body] == [
        (s.name, ast.unparse(ast.parse(s.expr, mode="eval").body)) for s in NINJA.steps
    ]


def test_the_definitions_forward_is_the_step_rules_forward(lecture_batch):
    params, Xb, Yb = lecture_batch
    ours = NINJA.forward(dict(params, Xb=Xb, Yb=Yb, n=Xb.shape[0]))
    theirs = rules.forward(params, Xb, Yb)
    for s in NINJA.steps:
        assert torch.equal(ours[s.name], theirs[s.name]), s.name


def test_a_third_exercise_gets_its_order_gradients_and_forward():
    assert TINY.backward_order() == ["logprobs", "probs", "logits", "W", "b"]
    assert [g.grade_id for g in TINY.gradients()] == [
        f"ex1_d{t}" for t in ["logprobs", "probs", "logits", "W", "b"]
    ]
    assert TINY.consumers("logits") == ["probs"] and TINY.inputs["logits"] == ("W", "b")
    g = torch.Generator().manual_seed(0)
    X, W, b = torch.randn(4, 3, generator=g), torch.randn(3, 5, generator=g), torch.zeros(5)
    loss = TINY.forward({"X": X, "y": torch.tensor([0, 1, 2, 3]), "W": W, "b": b, "n": 4})["loss"]
    assert torch.allclose(loss, torch.nn.functional.cross_entropy(X @ W + b, torch.tensor([0, 1, 2, 3])))


def test_the_lectures_data_cell_is_the_one_every_names_exercise_shares():
    nb = json.loads((ROOT / "source" / spec.ASSIGNMENT / f"{spec.NOTEBOOK}.ipynb").read_text())
    cells = {c["metadata"].get("nbgrader", {}).get("grade_id"): "".join(c["source"]) for c in nb["cells"]}
    assert (cells["data_md"], cells["data_read"]) == (names.READ_NAMES_TEXT, names.READ_NAMES)
