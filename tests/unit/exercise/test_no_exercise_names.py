"""The engine knows no exercise: no module of the package names a tensor of either exercise as
a key ("ln1rstd", 'bnvar_inv') outside that exercise's own folders: its definition
(grader/exercise/definitions/<name>: the forward pass, its data and sizes, what students see) and
its answers (grader/reference/<name>/: its step rules, its named mistakes, its demo class, judge-side
only). Everything else the kit does with an exercise derives from its definition."""

from __future__ import annotations

import re

from grader.exercise.definitions.backprop_ninja import BACKPROP_NINJA as NINJA
from grader.exercise.definitions.gpt_block import GPT_BLOCK as GPT

from conftest import ROOT

PACKAGE = ROOT / "grader"
# Words that are a tensor of one exercise and a plain word of the kit's own ("scores" of a class).
COMMON = {"loss", "logits", "logprobs", "h", "scores"}


def _names(d) -> set[str]:
    return ({s.name for s in d.steps} | set(d.params)) - COMMON


def _files_naming(names: set[str]) -> dict[str, set[str]]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = str(path.relative_to(PACKAGE))
        if rel.startswith(("exercise/definitions/", *(f"reference/{d.name}/" for d in (NINJA, GPT)))):
            continue
        code = "\n".join(line.split("#")[0] for line in path.read_text().splitlines())  # not comments
        hits = {n for n in names if re.search(f"[\"'`]{re.escape(n)}[\"'`]", code)}
        if hits:
            found[rel] = hits
    return found


def test_no_module_names_a_tensor_of_the_gpt_block():
    assert _files_naming(_names(GPT) - _names(NINJA)) == {}


def test_no_module_names_a_tensor_of_backprop_ninja():
    assert _files_naming(_names(NINJA) - _names(GPT)) == {}


def test_each_exercise_has_its_own_folders():
    for d in (NINJA, GPT):
        assert (PACKAGE / "exercise" / "definitions" / d.name).is_dir() or (
            PACKAGE / "exercise" / "definitions" / f"{d.name}.py"
        ).is_file()
        assert (PACKAGE / "reference" / d.name / "mistakes.py").is_file()
