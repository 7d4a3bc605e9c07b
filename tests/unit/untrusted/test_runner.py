"""grader/untrusted/runner.py in-process: Runner.run_cell's statement-level isolation, fresh
injected values, recorded (never raised) failures, the statement time limit from the plan, and
_export's plain copies. No fork, no server."""

from __future__ import annotations

import signal
import time

import pytest
import torch

from grader.replay.plan import what_is_asked
from grader.untrusted.runner import NoIPython, Runner, _export


def run(source: str, ns: dict | None = None, inject: dict | None = None, label: str = "ex1_solution"):
    runner = Runner({}, {})
    ns = {"torch": torch} if ns is None else ns
    runner.run_cell(ns, {"label": label, "source": source}, inject)
    return ns, runner.errors


# ---------------------------------------------------------------- statement-level isolation
def test_a_statement_that_raises_costs_only_itself():
    ns, errors = run("a = 1\nb, c = 2, 1 / 0\nd = a + 2")
    assert ns["a"] == 1 and ns["d"] == 3
    assert "b" not in ns and "c" not in ns
    assert errors == [
        {
            "cell": "ex1_solution",
            "line": 2,
            "error": "ZeroDivisionError: division by zero",
            "assigns": ["b", "c"],
        }
    ]


def test_multi_line_statement_error_has_its_first_line():
    ns, errors = run("x = 1\nfor i in range(2):\n    y = i\n    z = undefined_name\nw = 5")
    assert ns["w"] == 5 and ns["y"] == 0
    assert len(errors) == 1
    assert errors[0]["line"] == 2 and errors[0]["error"].startswith("NameError")
    assert errors[0]["assigns"] == ["i", "y", "z"]


def test_errors_accumulate_over_cells():
    runner = Runner({}, {})
    ns: dict = {}
    runner.run_cell(ns, {"label": "one", "source": "raise ValueError('a')"})
    runner.run_cell(ns, {"label": "two", "source": "ok = 1\nraise KeyError('b')"})
    assert [(e["cell"], e["line"], e["error"]) for e in runner.errors] == [
        ("one", 1, "ValueError: a"),
        ("two", 2, "KeyError: 'b'"),
    ]


# ---------------------------------------------------------------- injection
def test_injected_values_are_fresh_clones_before_every_statement():
    original = torch.tensor([1.0, 2.0])
    ns, errors = run(
        "x += 1\nseen = x.clone()\nx.mul_(0)\nalso = x.clone()\nsame = x is orig",
        ns={"orig": original},
        inject={"x": original},
    )
    assert errors == []
    assert torch.equal(ns["seen"], original)  # the += of the first statement is gone
    assert torch.equal(ns["also"], original)
    assert ns["same"] is False  # never the object passed in
    assert torch.equal(original, torch.tensor([1.0, 2.0]))


def test_injected_value_overrides_a_reassignment():
    original = torch.tensor([3.0])
    ns, _ = run("x = torch.zeros(1)\ny = x + 0", inject={"x": original})
    assert torch.equal(ns["y"], original)


# ---------------------------------------------------------------- what is recorded, not raised
def test_syntax_error_is_recorded():
    ns, errors = run("a = 1\nb = (")
    assert "a" not in ns  # the cell does not parse: nothing runs
    assert len(errors) == 1
    assert errors[0]["error"].startswith("SyntaxError") and errors[0]["assigns"] == []
    assert errors[0]["cell"] == "ex1_solution" and errors[0]["line"] in (2, 3)


def test_sys_exit_is_recorded():
    ns, errors = run("import sys\nsys.exit(3)\nafter = 1")
    assert ns["after"] == 1
    assert errors == [{"cell": "ex1_solution", "line": 2, "error": "SystemExit: 3", "assigns": []}]


def test_keyboard_interrupt_is_not_swallowed():
    with pytest.raises(KeyboardInterrupt):
        run("raise KeyboardInterrupt")


def test_a_statement_past_the_plans_time_is_stopped_and_the_next_one_runs():
    runner = Runner({"statement_seconds": 0.2}, {})
    assert runner.statement_seconds == 0.2 and Runner({}, {}).statement_seconds == 10.0
    ns: dict = {}
    previous = signal.signal(signal.SIGALRM, runner.on_alarm)  # as the server installs it
    try:
        runner.run_cell(ns, {"label": "ex1_solution", "source": "while True:\n    pass\nafter = 1"})
    finally:
        signal.signal(signal.SIGALRM, previous)
    assert ns["after"] == 1
    assert runner.errors == [
        {"cell": "ex1_solution", "line": 1, "error": "StatementTimeout: stopped after 0.2 s", "assigns": []}
    ]
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_get_ipython_is_a_no_op():
    ns, errors = run(
        "get_ipython().run_line_magic('matplotlib', 'inline')\nx = get_ipython().anything(1, k=2)",
        ns={"get_ipython": NoIPython},
    )
    assert errors == [] and ns["x"] is None


def test_magics_are_ignored():
    ns, errors = run("%matplotlib inline\nq = 5\n!ls /\nif q:\n    %time r = 1\n    s = 2")
    assert errors == []
    assert ns["q"] == 5 and ns["s"] == 2 and "r" not in ns


# ---------------------------------------------------------------- _export
class Tagged(torch.Tensor):
    pass


def test_export_tensor_subclass_is_a_plain_copy():
    base = torch.arange(4.0, requires_grad=True) * 2
    value = base.as_subclass(Tagged)
    assert type(value) is Tagged
    info, t = _export(value)
    assert info == {"kind": "tensor"}
    assert type(t) is torch.Tensor
    assert not t.requires_grad
    assert torch.equal(t, torch.arange(4.0) * 2)
    assert t.untyped_storage().data_ptr() != value.untyped_storage().data_ptr()
    t.zero_()
    assert torch.equal(value.detach().as_subclass(torch.Tensor), torch.arange(4.0) * 2)


def test_export_non_contiguous_tensor():
    value = torch.arange(6.0).view(2, 3).T
    info, t = _export(value)
    assert info == {"kind": "tensor"} and t.is_contiguous() and torch.equal(t, value)


def test_export_none_and_other():
    assert _export(None) == ({"kind": "none"}, None)
    assert _export([1, 2]) == ({"kind": "other", "type": "list"}, None)
    assert _export(3.5) == ({"kind": "other", "type": "float"}, None)


# ---------------------------------------------------------------- a run's prints and its clock
def test_a_runs_print_formats_nothing_and_is_no_name_of_the_students():
    """Nobody reads a run's output, and formatting tensors costs more than a derived backward:
    an answer cell's debugging prints are not charged to it (grader/verdicts/numeric.py)."""
    formatted = []

    class Loud:
        def __str__(self):
            formatted.append(1)
            return "loud"

    ex1 = {"label": "ex1_solution", "grade_id": "ex1_solution", "kind": "answer"}
    ex1["source"] = "print(loud, dhpreact)\ndef shout():\n    print(loud)\nshout()\nx = 1"
    ex3 = {"label": "ex3_solution", "grade_id": "ex3_solution", "kind": "answer", "source": "dhprebn = x"}
    plan = {"cells": [ex1, ex3], "first_answer": 0, **what_is_asked()}
    runner = Runner(plan, {"inject": {"dhpreact": torch.ones(2)}})
    ns = {"loud": Loud(), "dhpreact": torch.ones(2)}
    runner.run(ns, "ex3")
    assert formatted == [] and runner.errors == [] and ns["x"] == 1
    assert "print" not in ns and ns["__builtins__"]["len"] is len
    assert set(runner.cpu) == {"ex1_solution", "ex3_solution"}


def test_a_cells_system_time_is_not_its_count(tmp_path):
    """Writing files and faulting memory in is the kernel's work, no answer's (numeric.py): a
    cell that writes 256 MB is counted for its Python, not for the copying."""
    runner = Runner({}, {})
    fill = tmp_path / "fill.bin"
    source = f"_chunk = bytes(256 * 2**20)\nwith open({str(fill)!r}, 'wb') as f:\n    f.write(_chunk)"
    started = time.thread_time()
    runner.run_cell({}, {"label": "ex1_solution", "source": source})
    spent = time.thread_time() - started
    assert runner.errors == [] and spent > 0.02
    assert runner.cpu["ex1_solution"] < spent / 4
