"""grader/untrusted/protocol.py, what both sides of the trust boundary share: standard library
only (importing it runs nothing of the untrusted side), and the names it builds are the strings
that were on the wire before it existed."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from grader.exercise import spec
from grader.replay.plan import run_order
from grader.untrusted import protocol as p

PROTOCOL = Path(p.__file__)


def _imported(tree: ast.AST) -> set[str]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name.partition(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            out.add("." * node.level + (node.module or "").partition(".")[0])
    return out


def test_the_protocol_imports_only_the_standard_library():
    tree = ast.parse(PROTOCOL.read_text())
    typing_only = [
        n for n in ast.walk(tree) if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING"
    ]
    for block in typing_only:  # torch, for annotations only: never imported
        tree.body.remove(block)
    assert {m for m in _imported(tree) if m not in sys.stdlib_module_names} == set()


@pytest.mark.integration
def test_importing_the_protocol_imports_no_torch_and_nothing_else_of_the_kit():
    code = (
        "import sys, grader.untrusted.protocol; "
        "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('grader')))"
    )
    proc = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.stdout.split() == ["['grader',", "'grader.untrusted',", "'grader.untrusted.protocol']"], (
        proc.stderr
    )


# ------------------------------------------------------------ the same strings on the wire
def test_run_names():
    assert (p.AS_SUBMITTED, p.EX3, p.run_name_local("dlogprobs")) == ("main", "ex3", "local:dlogprobs")
    assert [p.parse_run_name(r) for r in ("main", "ex3", "local:dW1")] == [
        ("main", ""),
        ("ex3", ""),
        ("local", "dW1"),
    ]
    assert p.run_name_local("dh", "dW2") == "local:dh+dW2"
    assert [p.local_gradients(r) for r in ("local:dh+dW2", "local:dW1", "main", "ex3")] == [
        ["dh", "dW2"],
        ["dW1"],
        [],
        [],
    ]


def test_every_run_the_judge_sends_parses_back():
    runs = run_order()
    assert runs[0] == p.AS_SUBMITTED and p.EX3 in runs
    for run in runs:
        kind, gradient = p.parse_run_name(run)
        assert kind in (p.AS_SUBMITTED, p.EX3, p.LOCAL)
        assert run == (p.run_name_local(gradient) if kind == p.LOCAL else kind)


@pytest.mark.parametrize(
    ("where", "name", "key"),
    [
        (spec.ANSWER_CELLS[1], "dlogprobs", f"{spec.ANSWER_CELLS[1]}/dlogprobs"),
        (None, "dhprebn", "dhprebn"),
        (p.EX4, "dW1", "ex4/dW1"),
        (p.TRAINED, "bngain", "train/bngain"),
    ],
)
def test_value_keys(where, name, key):
    assert p.value_key(where, name) == key and p.parse_value_key(key) == (where, name)


def test_guard_modes_and_statuses():
    assert (p.BLOCK, p.WATCH, p.OPEN) == ("block", "watch", "open") == p.GUARD_MODES
    assert p.timed_out(2.5) == "timed out after 2.5 s" and p.timed_out(2.5).startswith(p.STATUS_TIMED_OUT)
    assert p.STATUS_OK == "ok"


def test_the_kernels_paths_are_defined_once():
    """confine/warm.py, confine/kernel.py and untrusted/zygote.py name them from the protocol."""
    grader = PROTOCOL.parents[1]
    shared = {p.SUBMISSION_INSIDE, p.IPC_INSIDE, p.KERNEL_CONNECTION_FILE}
    for module in ("confine/kernel.py", "confine/warm.py", "untrusted/zygote.py"):
        tree = ast.parse((grader / module).read_text())
        assert {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)} & shared == set(), module
