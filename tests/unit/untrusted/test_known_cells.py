"""The notebook's data-split cell, recognised by the warm servers (grader/untrusted/known_cells.py):
run with the vectorised build, it must print and leave exactly what running it as written does,
in the kernel server's first cells and in the replay runner alike; any other text, and any input
the twin could read otherwise, runs the lecture's loop."""

from __future__ import annotations

import ast
import contextlib
import io
import json
import random

import pytest
import torch

from grader.exercise.definitions.backprop_ninja import network
from grader.untrusted import known_cells
from grader.untrusted.kernel_prefix import Prefix
from grader.untrusted.runner import Runner

from conftest import ROOT

CELL = network.DATA_SPLIT_CELL
SILENT = lambda *a: None  # noqa: E731 - a print of the notebook's own
NOT_TORCH = type("NotTorch", (), {"tensor": staticmethod(torch.tensor)})  # a `torch` of its own


@pytest.fixture
def vectorised(monkeypatch):
    """How many times the twin built a split with network.build_dataset."""
    calls, real = [], network.build_dataset
    monkeypatch.setattr(network, "build_dataset", lambda *a: calls.append(a) or real(*a))
    return calls


def _start(words: list[str]) -> dict:
    """What the notebook's earlier cells leave for the data split: the words, their vocabulary."""
    chars = sorted(set("".join(words)))
    stoi = {s: i + 1 for i, s in enumerate(chars)}
    stoi["."] = 0
    return {"__name__": "__main__", "random": random, "torch": torch, "words": list(words), "stoi": stoi}


def _ran(run, ns: dict) -> tuple[str, dict, object]:
    out = io.StringIO()
    random.seed(0)
    with contextlib.redirect_stdout(out):
        run(ns)
    return out.getvalue(), ns, random.getstate()


def _as_written(ns: dict, source: str = CELL, filename: str = "<prefix>"):
    return _ran(lambda n: exec(compile(source, filename, "exec"), n), ns)


def _same(a: tuple, b: tuple) -> None:
    (out_a, ns_a, state_a), (out_b, ns_b, state_b) = a, b
    assert out_a == out_b and state_a == state_b
    assert sorted(ns_a) == sorted(ns_b)
    for name, value in ns_a.items():
        other = ns_b[name]
        if isinstance(value, torch.Tensor):
            assert (value.dtype, value.shape, value.stride()) == (other.dtype, other.shape, other.stride())
            assert torch.equal(value, other), name
        elif name == "build_dataset":  # the lecture's own function, for every later cell
            assert value.__code__ == other.__code__ and value.__globals__ is ns_a
        elif name != "__builtins__":
            assert value == other, name


def test_the_notebook_holds_the_cell_as_the_kit_recognises_it():
    nb = json.loads((ROOT / "source" / "backprop_ninja" / "backprop_ninja.ipynb").read_text())
    cells = {c["metadata"].get("nbgrader", {}).get("grade_id"): "".join(c["source"]) for c in nb["cells"]}
    assert cells["data_split"] == CELL


def test_the_split_leaves_what_running_it_as_written_would(lecture_words, vectorised):
    cold = _as_written(_start(lecture_words))
    assert vectorised == []
    warm = _ran(lambda n: known_cells.run(CELL, n, "<prefix>"), _start(lecture_words))
    assert len(vectorised) == 3  # the cell's three splits, none by the loop
    _same(warm, cold)
    assert cold[0] == (
        "torch.Size([182625, 3]) torch.Size([182625])\n"
        "torch.Size([22655, 3]) torch.Size([22655])\n"
        "torch.Size([22866, 3]) torch.Size([22866])\n"
    )


def test_the_kernel_servers_first_cells_and_the_replay_runner_use_it(lecture_words, vectorised):
    cold = _as_written(_start(lecture_words))
    prefix = Prefix([CELL])
    prefix.ns.update(_start(lecture_words))
    kept = []
    warm = _ran(lambda n: kept.append(prefix.run()), prefix.ns)
    assert kept == [True] and prefix.skippable == [True]  # a kernel prints it instead of running it
    assert len(vectorised) == 3 and prefix.printed == [cold[0]]
    _same((prefix.printed[0], prefix.ns, warm[2]), cold)

    as_planned = ast.unparse(ast.parse(CELL))  # grader/replay/plan.py writes each cell back so
    runner = Runner({"cells": [{"label": "data_split", "source": as_planned}], "first_answer": 1}, {})
    replayed = _ran(runner.setup, _start(lecture_words))
    assert len(vectorised) == 6 and runner.errors == []
    _same(replayed, _as_written(_start(lecture_words), as_planned, "data_split"))


def test_the_cell_is_known_by_its_code_as_the_replays_plan_writes_it_too():
    assert known_cells.twin_for(ast.unparse(ast.parse(CELL))) is not None  # no comments, 4 spaces
    assert known_cells.twin_for(CELL.replace("# 80%", "# eighty per cent")) is not None
    assert known_cells.twin_for(CELL + "\nprint(") is None  # not Python
    assert known_cells.twin_for("def build_dataset(words):\n  return words") is None


def test_another_cell_runs_as_written(lecture_words, vectorised):
    other = CELL.replace("random.seed(42)", "random.seed(43)")
    assert known_cells.twin_for(other) is None
    ns = _start(lecture_words[:500])
    with contextlib.redirect_stdout(io.StringIO()):
        known_cells.run(other, ns, "<prefix>")
    assert vectorised == [] and ns["Xtr"].shape == (len(ns["Ytr"]), 3)


@pytest.mark.parametrize(
    "change, vectorised_splits",
    [
        (lambda ns: None, 3),
        (lambda ns: ns.update(words=["emma", "ava"]), 2),  # the middle split has no words
        (lambda ns: ns["stoi"].update({"a": 1.0}), 0),  # a vocabulary of floats: float tensors
        (lambda ns: ns.update(print=SILENT), 0),
        (lambda ns: ns.update(torch=NOT_TORCH), 0),
        (lambda ns: ns["stoi"].pop("z"), 0),  # a character out of the vocabulary: the loop's KeyError
    ],
)
def test_where_the_twin_could_differ_the_lectures_loop_runs(
    lecture_words, vectorised, change, vectorised_splits
):
    def start():
        ns = _start(lecture_words[:2000])
        change(ns)
        return ns

    cold_ns, warm_ns = start(), start()
    try:
        cold = _as_written(cold_ns)
    except KeyError as e:
        with pytest.raises(KeyError, match=str(e)):
            known_cells.run(CELL, warm_ns, "<prefix>")
        assert warm_ns["build_dataset"].__globals__ is warm_ns  # the lecture's again, not the twin
        return
    warm = _ran(lambda n: known_cells.run(CELL, n, "<prefix>"), warm_ns)
    assert len(vectorised) == vectorised_splits
    _same(warm, cold)
