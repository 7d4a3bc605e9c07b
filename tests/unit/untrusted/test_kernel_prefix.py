"""The notebook's first cells run once for every warm kernel (grader/untrusted/kernel_prefix.py):
in a real IPython shell, each kernel must print and hold what running the cells would have."""

from __future__ import annotations

import importlib.machinery
import random
import sys

import pytest
from IPython.core import interactiveshell
from IPython.core.interactiveshell import InteractiveShell

from grader.untrusted.kernel_prefix import KERNEL_IMPORTS, MODULE, Prefix, once_per_cell
from grader.untrusted.protocol import PREFIX_TAKE, TEST_CELLS_MIME

CELLS = [
    "import random\n%config Completer.use_jedi = False",  # a magic: really runs
    "words = ['emma', 'olivia', 'ava']\nprint(len(words))",
    "random.seed(42)\nrandom.shuffle(words)\nstoi = {w: i for i, w in enumerate(words)}\n"
    "def lookup(w):\n    return stoi[w] + offset\noffset = 10\nprint(words)",
]


@pytest.fixture
def shell():
    sh = InteractiveShell.instance()
    sh.user_ns.clear()
    sh.init_user_ns()
    yield sh
    sh.input_transformers_post.clear()
    sys.modules.pop(MODULE, None)
    InteractiveShell.clear_instance()


def _run(shell, source: str, capsys) -> str:
    result = shell.run_cell(source, store_history=True)
    assert result.success, result.error_in_exec or result.error_before_exec
    return capsys.readouterr().out


def _cold(shell, capsys) -> tuple[list[str], dict]:
    outs = [_run(shell, c, capsys) for c in CELLS]
    return outs, {k: shell.user_ns[k] for k in ("words", "stoi", "offset")}


def test_skipped_cells_print_and_leave_what_running_them_would(shell, capsys):
    outs_cold, ns_cold = _cold(shell, capsys)
    state_cold = random.getstate()
    shell.user_ns.clear()
    shell.init_user_ns()
    prefix = Prefix(CELLS)
    assert prefix.run()
    assert prefix.skippable == [False, True, True]
    random.seed(7)  # a fresh kernel's own state
    prefix.install(shell)
    outs = [_run(shell, c, capsys) for c in CELLS]
    assert outs == outs_cold
    assert {k: shell.user_ns[k] for k in ("words", "stoi", "offset")} == ns_cold
    assert random.getstate() == state_cold
    # a function from the skipped cells looks up the kernel's names, as a cold one would
    shell.user_ns["offset"] = 100
    assert _run(shell, "print(lookup('ava'))", capsys) == f"{ns_cold['stoi']['ava'] + 100}\n"


def test_a_cell_run_in_the_middle_gets_the_state_so_far(shell, capsys):
    prefix = Prefix(CELLS)
    assert prefix.run()
    prefix.install(shell)
    assert _run(shell, CELLS[0], capsys) == ""
    assert _run(shell, CELLS[1], capsys) == "3\n"
    # the student's own cell before the last: words exists, unshuffled, and nothing is printed twice
    assert _run(shell, "print(words)", capsys) == "['emma', 'olivia', 'ava']\n"
    assert "stoi" not in shell.user_ns
    assert _run(shell, CELLS[2], capsys).startswith("['")  # really runs now
    assert "stoi" in shell.user_ns


def test_a_notebook_that_starts_otherwise_runs_everything(shell, capsys):
    prefix = Prefix(CELLS)
    assert prefix.run()
    prefix.install(shell)
    assert _run(shell, "x = 1", capsys) == ""
    assert _run(shell, CELLS[1], capsys) == "3\n"
    assert "words" in shell.user_ns and "stoi" not in shell.user_ns


def _take(shell, first: int, count: int) -> tuple:
    """The grader's one cell for the skippable cells, as LimitedExecute sends it (not counted):
    the run's result and what it published."""
    said = []
    shell.display_pub.publish = lambda data, *a, **k: said.append(data)
    source = PREFIX_TAKE.format(nonce="n1", first=first, count=count)
    return shell.run_cell(source, store_history=False), said


def _history(shell) -> tuple:
    ns = shell.user_ns
    return list(ns["In"]), [ns.get(f"_i{n}") for n in range(1, 4)], ns["_i"], ns["_ii"], shell.execution_count


def test_cells_taken_in_one_go_leave_what_running_them_one_by_one_would(shell, capsys):
    outs_cold, ns_cold = _cold(shell, capsys)
    state_cold, history_cold = random.getstate(), _history(shell)
    shell.reset(new_session=True)  # a fresh kernel's history and count
    shell.user_ns.clear()
    shell.init_user_ns()
    prefix = Prefix(CELLS)
    assert prefix.run()
    random.seed(7)
    prefix.install(shell)
    assert _run(shell, CELLS[0], capsys) == outs_cold[0]  # the magic's cell really runs
    result, said = _take(shell, 1, 2)
    assert result.success, result.error_in_exec
    assert capsys.readouterr().out == ""
    cells = said[0][TEST_CELLS_MIME]["cells"]
    assert [c["stdout"] for c in cells] == outs_cold[1:]
    assert said[0][TEST_CELLS_MIME]["nonce"] == "n1"
    assert all(c["stderr"] == "" and c["value"] is None and c["error"] is None for c in cells)
    assert {k: shell.user_ns[k] for k in ("words", "stoi", "offset")} == ns_cold
    assert random.getstate() == state_cold
    assert _history(shell) == history_cold  # In, _i2, _i3, _i, _ii and the next count
    assert _run(shell, "print(lookup('ava'))", capsys) == f"{ns_cold['stoi']['ava'] + 10}\n"


@pytest.mark.parametrize(
    "first, count", [(2, 1), (0, 3), (1, 1)], ids=["not-next", "must-run", "not-to-the-end"]
)
def test_a_take_that_does_not_fit_changes_nothing_and_the_cells_run_one_by_one(shell, capsys, first, count):
    outs_cold, ns_cold = _cold(shell, capsys)
    shell.reset(new_session=True)
    shell.user_ns.clear()
    shell.init_user_ns()
    prefix = Prefix(CELLS)
    assert prefix.run()
    prefix.install(shell)
    _run(shell, CELLS[0], capsys)
    result, said = _take(shell, first, count)
    assert isinstance(result.error_in_exec, RuntimeError) and said == []
    capsys.readouterr()  # the refusal's traceback, in a cell the grader drops
    assert "words" not in shell.user_ns and shell.execution_count == 2
    # what the grader then sends, each on its own, at the count the refused cell did not use
    assert [_run(shell, c, capsys) for c in CELLS[1:]] == outs_cold[1:]
    assert {k: shell.user_ns[k] for k in ("words", "stoi", "offset")} == ns_cold


def test_a_failing_or_noisy_cell_means_nothing_is_skipped():
    assert not Prefix(["raise ValueError('no data')"]).run()
    assert not Prefix(["import sys\nprint('x', file=sys.stderr)"]).run()
    shows = Prefix(["x = 1", "x"])  # a bare expression is shown by a kernel: it really runs
    assert shows.run()
    assert shows.skippable == [True]


def test_a_cell_is_transformed_and_compiled_once_for_ipykernel_and_ipython(shell, capsys, monkeypatch):
    cells = ["%time x = 1", "y = 2\nprint(y)", "y = 2\nprint(y)", "await_me = 3"]
    plain = [shell.transform_cell(c) for c in cells]
    seen, compiled = [], []
    manager = shell.input_transformer_manager.transform_cell
    shell.input_transformer_manager.transform_cell = lambda cell: seen.append(cell) or manager(cell)
    should_be_async = interactiveshell._should_be_async
    monkeypatch.setattr(
        interactiveshell, "_should_be_async", lambda cell: compiled.append(cell) or should_be_async(cell)
    )
    once_per_cell(shell)
    # as a kernel runs a cell: ipykernel's do_execute transforms it and asks whether it must run
    # as a coroutine, then IPython's run_cell does both (and %time transforms its own line)
    for cell, expected in zip(cells, plain):
        transformed = shell.transform_cell(cell)
        assert transformed == expected
        assert shell.should_run_async(cell, transformed_cell=transformed) is False
        _run(shell, cell, capsys)
    assert seen == ["%time x = 1", "x = 1", "y = 2\nprint(y)", "y = 2\nprint(y)", "await_me = 3"]
    assert compiled == plain  # once a cell, the same text in a later cell again
    assert shell.user_ns["x"] == 1 and shell.user_ns["await_me"] == 3 and shell.execution_count == 5
    # a cell that must run as a coroutine still does
    assert shell.should_run_async("await f()", transformed_cell="await f()\n") is True


def test_every_module_imported_ahead_exists_here():
    """import_ahead passes over a module it cannot import (another version's layout): a name
    misspelt here would be passed over silently, and every kernel would import it again."""
    assert [name for name in KERNEL_IMPORTS if not _found(name)] == []


def _found(name: str) -> bool:
    """Whether the module is installed, found without importing it or its packages (importing
    matplotlib starts fc-list: a unit test starts no process)."""
    if name in sys.builtin_module_names:
        return True
    path = None
    for part in name.split("."):
        spec = importlib.machinery.PathFinder.find_spec(part, path)
        if spec is None:
            return False
        path = spec.submodule_search_locations
    return True
