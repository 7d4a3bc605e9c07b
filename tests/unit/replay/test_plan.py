"""grader/replay/plan.py in-process: the run order's safety property and what each run is
handed, re-seeding the locked cells, the replay's cells and its warm prefix, and the
one-source-of-truth check that the notebook's locked cells, as the plan re-seeds them, and
`fresh_inputs` build the very same parameters, batch and loss for any seed.

No replay server, no nbgrader, no kernel: everything here runs in this process.
"""

from __future__ import annotations

import os
import random
import shutil

import nbformat
import pytest
import torch

from grader.exercise import spec
from grader.exercise.cells import nbgrader_meta, strip_magics
from grader.exercise.definitions import backprop_ninja as lecture
from grader.exercise.definitions.backprop_ninja import network
from grader.reference.backprop_ninja import rules
from grader.reference.inputs import dataset, fresh_inputs
from grader.replay.plan import (
    AS_SUBMITTED,
    joint_runs,
    kernel_prefix,
    replay_cells,
    reseed,
    run_order,
    warm_prefix,
    what_is_asked,
    with_correct_inputs,
)
from grader.settings import JudgeSettings
from grader.untrusted.runner import Runner

from conftest import ROOT

SOURCE_NB = ROOT / "source" / spec.ASSIGNMENT / f"{spec.NOTEBOOK}.ipynb"
SEED_TEXT = str(lecture.LECTURE_SEED)
EX1 = [g for g in spec.GRADIENTS if g.exercise == 1]
WARM = ["imports", "data_read", "data_vocab", "data_split", "cmp"]
S = 1234


@pytest.fixture(scope="module")
def source_nb():
    return nbformat.read(SOURCE_NB, 4)


def _gid(cell) -> str | None:
    return nbgrader_meta(cell).get("grade_id")


# ---------------------------------------------------------------- run_order
def handed(run: str) -> set[str]:
    """The gradients a run is handed the correct value of, from the step graph alone."""
    if run.startswith("local:"):
        return {"d" + t for t in spec.EXERCISE.upstream(run[len("local:") :][1:])}
    if run == "ex3":
        return {"dhpreact"}
    return set()


def test_run_order_starts_with_main_and_has_one_run_per_gradient_with_upstream():
    order = run_order()
    assert order[0] == "main"
    assert order.count("main") == 1 and order.count("ex3") == 1
    locals_ = [r for r in order if r.startswith("local:")]
    expected = [f"local:{g.name}" for g in EX1 if spec.EXERCISE.upstream(g.target)]
    assert sorted(locals_) == sorted(expected)
    assert len(locals_) == len(set(locals_)) == len(EX1) - 1  # all but dlogprobs
    assert "local:dlogprobs" not in order
    assert not spec.EXERCISE.upstream("logprobs")
    assert len(order) == 1 + len(expected) + 1


def test_run_order_safety_property():
    """No run is handed the correct value of a gradient whose own run is still to come."""
    order = run_order()
    position = {r: i for i, r in enumerate(order)}
    for i, run in enumerate(order):
        for d in handed(run):
            if d == "dlogprobs":
                continue  # no upstream, so no local run of its own
            own = position.get(f"local:{d}")
            assert own is not None, f"{run} is handed {d}, which has no local run"
            assert own < i, f"{run} (at {i}) is handed {d}, whose own run comes later (at {own})"
    ex3 = position["ex3"]
    assert position["local:dhpreact"] < ex3
    for run in order[:ex3]:
        assert "dhprebn" not in handed(run), f"{run} runs before ex3 and is handed dhprebn"
    # the property is not vacuous: later runs are handed dhprebn
    assert any("dhprebn" in handed(r) for r in order[ex3 + 1 :])


def test_joint_runs_join_gradients_handed_the_same_and_keep_the_orders_promise():
    """A joint run stands where its first gradient's run stood, is handed what that run was, and
    no run in the joint order is handed a gradient whose own run (joint or not) is still to come;
    every gradient keeps exactly one run; on any subset of the runs, as the judge asks for them."""
    grads = {t: torch.zeros(1) for t in [g.target for g in spec.GRADIENTS if g.exercise == 1]}
    joint = joint_runs(run_order())
    assert "local:dh+dW2+db2" in joint and "local:dbngain+dbnraw+dbnbias" in joint
    assert "local:dembcat+dW1+db1" in joint
    assert len([r for r in joint if r.startswith("local:")]) == len(EX1) - 1 - 6
    rng = random.Random(3)
    for trial in range(200):
        asked = [r for r in run_order()[1:] if trial == 0 or rng.random() < 0.5]
        joint = joint_runs(asked)
        kept = [g for r in joint if r.startswith("local:") for g in r[len("local:") :].split("+")]
        assert sorted(kept) == sorted(r[len("local:") :] for r in asked if r.startswith("local:"))
        judged = {"dlogprobs", *(r[len("local:") :] for r in run_order() if r not in asked)}
        for run in joint:
            given = set(with_correct_inputs(run, grads))
            assert given <= judged, (run, given - judged)
            members = run[len("local:") :].split("+") if run.startswith("local:") else []
            assert all(set(with_correct_inputs(f"local:{m}", grads)) == given for m in members)
            judged |= set(members) | ({"dhprebn"} if run == "ex3" else set())


def test_handed_is_what_the_replay_injects():
    """The sets the safety property checks are the ones the judge writes to WORK/inject.pt
    (plan.with_correct_inputs), and Runner.run injects exactly those, nothing more."""
    grads = {
        k: torch.full((1,), float(i))
        for i, k in enumerate([s.out for s in rules.STEPS if s.out != "loss"] + spec.PARAMETERS)
    }
    names = {"d" + k for k in grads}
    cells = [
        {
            "label": spec.ANSWER_CELLS[ex],
            "grade_id": spec.ANSWER_CELLS[ex],
            "kind": "answer",
            "source": "pass",
        }
        for ex in (1, 2, 3)
    ]
    plan = {"cells": cells, "first_answer": 0, **what_is_asked()}
    assert with_correct_inputs(AS_SUBMITTED, grads) == {}
    for run in run_order()[1:]:
        inject = with_correct_inputs(run, grads)
        assert set(inject) == handed(run), run
        ns: dict = {}
        Runner(plan, {"inject": inject}).run(ns, run)
        seen = {k for k in ns if k in names}
        assert seen == handed(run), run
        for k in seen:
            assert torch.equal(ns[k], grads[k[1:]])


# ---------------------------------------------------------------- reseed
def _exec(source: str) -> dict:
    ns: dict = {}
    exec(source, ns)
    return ns


def test_reseed_replaces_the_lecture_seed():
    out = reseed("g = torch.Generator().manual_seed(2147483647)\ntorch.manual_seed(2147483647)", 5)
    assert SEED_TEXT not in out
    assert out.split("\n") == ["g = torch.Generator().manual_seed(5)", "torch.manual_seed(5)"]


def test_reseed_keeps_arithmetic_and_other_constants():
    out = reseed("x = 2147483647 + 10\ns = '2147483647'\nf = 2147483647.0\nk = 2147483646", 5)
    ns = _exec(out)
    assert ns["x"] == 15
    assert ns["s"] == "2147483647"  # a string is not the seed
    assert ns["f"] == 2147483647.0  # nor a float
    assert ns["k"] == 2147483646


def test_reseed_changes_batch_size_only_when_given():
    src = "batch_size = 32\nn = batch_size\nmax_batch_size = 32"
    kept = _exec(reseed(src, 5))
    assert (kept["batch_size"], kept["n"], kept["max_batch_size"]) == (32, 32, 32)
    changed = _exec(reseed(src, 5, 16))
    assert (changed["batch_size"], changed["n"], changed["max_batch_size"]) == (16, 16, 32)


def test_reseed_handles_magics():
    out = reseed(
        "import math\n%matplotlib inline\n!ls\nx = 2147483647\nfor i in range(1):\n    %time y = i", 7
    )
    assert "%" not in out and "!" not in out
    assert _exec(out)["x"] == 7


# ---------------------------------------------------------------- replay_cells
def test_replay_cells_kinds_and_labels(source_nb):
    cells = replay_cells(source_nb.cells, JudgeSettings(seed=S))
    answers = [c for c in cells if c["kind"] == "answer"]
    assert [c["label"] for c in answers] == [spec.ANSWER_CELLS[ex] for ex in (1, 2, 3, 4)]
    assert all(c["grade_id"] == c["label"] for c in answers)
    graded = {_gid(c) for c in source_nb.cells if c.metadata.get("nbgrader", {}).get("grade")}
    assert graded >= {g.grade_id for g in spec.GRADED}
    labels = [c["label"] for c in cells]
    assert not graded & set(labels)
    assert not spec.KERNEL_ONLY_CELLS & set(labels)
    assert {c["kind"] for c in cells} == {"locked", "answer"}
    # notebook order: the locked code cells that are not kernel-only, and the answers
    expected = [
        _gid(c)
        for c in source_nb.cells
        if c.cell_type == "code"
        and not c.metadata["nbgrader"].get("grade")
        and _gid(c) not in spec.KERNEL_ONLY_CELLS
    ]
    assert labels == expected
    assert labels[:8] == WARM + ["params", "batch", "forward"]


def test_replay_cells_keeps_a_students_own_cell(source_nb):
    nb = nbformat.from_dict(source_nb)
    at = next(i for i, c in enumerate(nb.cells) if _gid(c) == "autograd")
    mine = "N = batch_size  # mine, seed 2147483647 stays"
    nb.cells.insert(at + 1, nbformat.v4.new_code_cell(mine))
    nb.cells.insert(0, nbformat.v4.new_code_cell("top = 1"))
    cells = replay_cells(nb.cells, JudgeSettings(seed=S))
    added = [c for c in cells if c["kind"] == "added"]
    assert [c["label"] for c in added] == ["your cell after the top", "your cell after autograd"]
    assert all(c["grade_id"] is None and not c["seeded"] for c in added)
    assert added[1]["source"] == mine  # the student's code is not re-seeded
    labels = [c["label"] for c in cells]
    assert labels.index("your cell after autograd") == labels.index("forward") + 1
    assert labels.index("your cell after autograd") + 1 == labels.index("ex1_solution")


def test_seeded_is_exactly_the_cells_with_the_seed(source_nb):
    cells = replay_cells(source_nb.cells, JudgeSettings(seed=S))
    original = {_gid(c): c["source"] for c in source_nb.cells}
    with_seed = {c["label"] for c in cells if SEED_TEXT in original[c["label"]]}
    assert with_seed == {"params", "ex4_params"}
    assert {c["label"] for c in cells if c["seeded"]} == with_seed
    for c in cells:
        if c["kind"] == "locked":
            assert SEED_TEXT not in c["source"]
        if c["seeded"]:
            assert f"manual_seed({S})" in c["source"]


def test_batch_cell_gets_the_settings_batch_size(source_nb):
    default = {c["label"]: c for c in replay_cells(source_nb.cells, JudgeSettings(seed=S))}
    small = {c["label"]: c for c in replay_cells(source_nb.cells, JudgeSettings(seed=S, batch_size=16))}
    assert "batch_size = 32" in default["batch"]["source"]
    assert "batch_size = 16" in small["batch"]["source"] and "batch_size = 32" not in small["batch"]["source"]
    assert not small["batch"]["seeded"]
    assert {k: c["source"] for k, c in default.items() if k != "batch"} == {
        k: c["source"] for k, c in small.items() if k != "batch"
    }


def test_the_kernels_prefix_is_every_leading_locked_cell(source_nb):
    """The kernel runs the notebook as it is: up to the first answer cell, none depends on the
    student, the seeded parameters and batch included (unlike the replay's warm prefix)."""
    code = [c for c in source_nb.cells if c.cell_type == "code"]
    first_answer = next(i for i, c in enumerate(code) if nbgrader_meta(c).get("solution"))
    assert kernel_prefix(source_nb.cells) == [c.source for c in code[:first_answer]]
    assert [_gid(c) for c in code[:first_answer]][-4:] == ["params", "batch", "forward", "autograd"]
    graded_first = [
        nbformat.v4.new_code_cell("x = 1", metadata={"nbgrader": {"grade": True, "locked": True}})
    ]
    assert kernel_prefix(graded_first + code) == []


def test_warm_prefix(source_nb):
    cells = replay_cells(source_nb.cells, JudgeSettings(seed=S))
    prefix = warm_prefix(cells)
    assert [p["label"] for p in prefix] == WARM
    by_label = {c["label"]: c for c in cells}
    assert not any(by_label[p["label"]]["seeded"] for p in prefix)
    assert spec.BATCH_CELL not in [p["label"] for p in prefix]
    # one warm server serves every submission: the prefix depends on neither seed nor batch size
    other = warm_prefix(replay_cells(source_nb.cells, JudgeSettings(seed=S + 77, batch_size=16)))
    assert other == prefix


# ---------------------------------------------------------------- one source of truth
@pytest.fixture(scope="module")
def notebook_run(source_nb, names_txt, tmp_path_factory):
    """Execute the notebook's replay cells up to `forward` in a plain namespace."""
    home = tmp_path_factory.mktemp("nbrun")
    shutil.copy(names_txt, home / "names.txt")
    cwd, py_state = os.getcwd(), random.getstate()
    warm = {"__name__": "__main__"}

    def execute(ns: dict, label: str, source: str) -> None:
        # in the data folder, without autograd, and leaving the global RNGs as they were
        os.chdir(home)
        try:
            with torch.random.fork_rng(devices=[]), torch.no_grad():
                exec(compile(strip_magics(source), label, "exec"), ns)
        finally:
            os.chdir(cwd)
            random.setstate(py_state)

    for p in warm_prefix(replay_cells(source_nb.cells, JudgeSettings(seed=S))):
        execute(warm, p["label"], p["source"])

    def run(settings: JudgeSettings) -> dict:
        cells = replay_cells(source_nb.cells, settings)
        assert [c["label"] for c in cells[: len(WARM)]] == WARM
        ns = dict(warm)
        for c in cells[len(WARM) :]:
            execute(ns, c["label"], c["source"])
            if c["label"] == "forward":
                return ns
        raise AssertionError("no forward cell")

    return run


@pytest.mark.parametrize(
    "settings",
    [JudgeSettings(seed=S), JudgeSettings(seed=S, batch_size=16), JudgeSettings(seed=7)],
    ids=["seed", "batch16", "seed7"],
)
def test_notebook_and_fresh_inputs_agree(notebook_run, names_txt, settings):
    ns = notebook_run(settings)
    fresh = fresh_inputs(dataset(names_txt), settings)
    for k in ["C", "W1", "b1", "W2", "b2", "bngain", "bnbias", "Xb", "Yb"]:
        assert ns[k].shape == fresh.values[k].shape, k
        assert torch.equal(ns[k].detach(), fresh.values[k]), k
    assert ns["Xb"].shape[0] == settings.batch_size == ns["n"]
    assert abs(float(ns["loss"]) - float(fresh.values["loss"])) < 1e-6
    # the seed matters: not the lecture's own parameters
    lecture_params, _ = network.init_params(vocab_size=fresh.values["C"].shape[0])
    assert not torch.equal(ns["C"], lecture_params["C"])


def test_no_run_is_handed_a_gradient_before_that_gradient_was_judged():
    """What `handed` gives each run, in run_order, never includes a gradient whose own
    verdict (its local run, or the main run for dlogprobs) is still to come."""
    grads = {t: torch.zeros(1) for t in [g.target for g in spec.GRADIENTS if g.exercise == 1]}
    judged = set()
    for run in run_order():
        given = set(with_correct_inputs(run, grads))
        assert given <= judged | {"dlogprobs"} if run != "main" else not given, (run, given - judged)
        kind, _, name = run.partition(":")
        judged |= {name} if kind == "local" else ({"dhprebn_ex3"} if kind == "ex3" else {"dlogprobs"})
        if kind == "local":
            assert name not in given
    # exercise 3 is judged before any run is handed dhprebn
    order = run_order()
    first_with_dhprebn = min(i for i, r in enumerate(order) if "dhprebn" in with_correct_inputs(r, grads))
    assert order.index("ex3") < first_with_dhprebn
