"""grader/reference/mistakes.py: each exercise's named mistakes, found by its definition. The
GPT block's catalogue (grader/reference/gpt_block/mistakes.py) on its real tensors: each mistake
is a real one (not the right value), and the hint names it when a student makes it."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from grader.authoring.check import run_notebook_code
from grader.exercise.definition import Step
from grader.exercise.definitions.backprop_ninja import BACKPROP_NINJA as NINJA
from grader.exercise.definitions.gpt_block import GPT_BLOCK as GPT
from grader.reference.mistakes import known_mistakes
from grader.reference.steps import definition_autograd
from grader.verdicts import hints

from tiny_exercise import TINY


@pytest.fixture(scope="module")
def gpt(names_folder):
    ns = run_notebook_code(GPT, names_folder)[0]
    return definition_autograd(GPT, {k: ns[k] for k in (*GPT.params, *GPT.data, *GPT.constants)})


GPT_MISTAKES = [("dlogits", "logits", 1), ("dmasked", "masked", 1), ("dgelu_in", "gelu_in", 2)]


@pytest.mark.parametrize("name,target,count", GPT_MISTAKES, ids=[m[0] for m in GPT_MISTAKES])
def test_the_gpt_blocks_mistakes_are_named(gpt, name, target, count):
    values, grads = gpt
    mistakes = known_mistakes(GPT, name, values, grads)
    assert len(mistakes) == count
    sizes = {k: int(values[k]) for k in ("B", "T", "C")}
    for label, wrong in mistakes.items():
        assert not torch.allclose(wrong, grads[target], rtol=1e-4, atol=1e-6), label  # a real mistake
        said = hints.value_hint(name, wrong, grads[target], n=32, mistakes=mistakes, sizes=sizes)
        assert said == label


def test_a_catalogue_is_its_own_exercises_only(gpt):
    values, grads = gpt
    assert "softmax" in next(iter(known_mistakes(GPT, "dmasked", values, grads)))
    assert known_mistakes(GPT, "dWq", values, grads) == {}
    # another exercise, or one that kept the name but not the forward pass, gets none
    assert known_mistakes(TINY, "dlogits", values, grads) == {}
    renamed = dataclasses.replace(NINJA, name=GPT.name)
    assert known_mistakes(renamed, "dmasked", values, grads) == {}
    changed = dataclasses.replace(GPT, steps=(*GPT.steps[:-1], Step("loss", "-logprobs.mean()")))
    assert known_mistakes(changed, "dmasked", values, grads) == {}


def test_backprop_ninjas_catalogue_is_found_by_its_definition(lecture_batch):
    from grader.reference.backprop_ninja import rules

    values, grads = rules.autograd_grads(*lecture_batch)
    assert "Bessel" in next(iter(known_mistakes(NINJA, "dhprebn", values, grads)))
