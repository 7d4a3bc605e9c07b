"""grader/preprocessors/limited_execute.py in-process, with the plain `python3` kernel (no
sandbox): the bounds on output, time and a dying kernel. Each module fixture is one kernel
start (four in all); the tests read what that one run left in the notebook."""

from __future__ import annotations

import copy
import logging
import time
import types

import pytest
from nbformat.v4 import new_code_cell, new_notebook
from nbgrader.utils import determine_grade
from traitlets.config import Config

from grader.confine.probe import ALLOW_ENV
from grader.exercise import spec
from grader.preprocessors import limited_execute
from grader.preprocessors.limited_execute import LimitedExecute

pytestmark = pytest.mark.integration  # starts processes: make integration


def _notebook(*sources: str):
    nb = new_notebook(cells=[new_code_cell(s) for s in sources])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def _run(tmp, nb, resources=None, **limits):
    """The plain python3 kernel is not the sandbox's: these tests opt in to it, explicitly. The
    opt-in marks this process as allowed (ALLOW_ENV): undone here, so no later test inherits it."""
    c = Config()
    c.LimitedExecute.allow_unsandboxed = True
    for k, v in limits.items():
        setattr(c.LimitedExecute, k, v)
    pre = LimitedExecute(config=c, kernel_name="python3", timeout=60, startup_timeout=60)
    with pytest.MonkeyPatch.context() as env:
        env.setenv(ALLOW_ENV, "")
        return pre.preprocess(nb, {"metadata": {"path": str(tmp)}, **(resources or {})})[0]


def _stream(cell, name: str) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream" and o.name == name)


def _errors(cell) -> list[tuple[str, str]]:
    return [(o.ename, o.evalue) for o in cell.outputs if o.output_type == "error"]


# ------------------------------------------------------------ one cell over max_output_bytes
FLOOD_LIMIT = 2000


@pytest.fixture(scope="module")
def flooded(tmp_path_factory):
    """Kernel start 1: a cell prints ~40 kB in many messages; the limit is 2 kB."""
    nb = _notebook(
        "import sys, time\nfor i in range(40):\n    print('x' * 1000, flush=True); time.sleep(0.005)",
        "print('after')",
    )
    return _run(tmp_path_factory.mktemp("flood"), nb, max_output_bytes=FLOOD_LIMIT)


def test_output_over_max_output_bytes_is_noted_on_stderr(flooded):
    assert _stream(flooded.cells[0], "stderr") == f"\n[output truncated: over {FLOOD_LIMIT} bytes]\n"


def test_the_note_outlives_nbgraders_line_limit(flooded):
    """nbgrader's LimitOutput (after this one in autograde) drops every stream past its line
    limit: the note comes first, so the line limit keeps it whatever the flood printed."""
    from nbgrader.preprocessors import LimitOutput

    cell, _ = LimitOutput(max_lines=3).preprocess_cell(copy.deepcopy(flooded.cells[0]), {}, 0)
    assert _stream(cell, "stderr") == f"\n[output truncated: over {FLOOD_LIMIT} bytes]\n"


def test_output_over_max_output_bytes_is_truncated(flooded):
    assert 0 < len(_stream(flooded.cells[0], "stdout")) <= FLOOD_LIMIT


def test_the_per_cell_limit_does_not_reach_the_next_cell(flooded):
    assert _stream(flooded.cells[1], "stdout") == "after\n"


# ------------------------------------------------------------ a grader slower than the kernel
@pytest.fixture(scope="module")
def read_slowly(tmp_path_factory):
    """Kernel start 5: a loaded grader. Each output message takes 0.3 s to read, so the cell's
    30 messages are still being read seconds after its reply came (the hostile corpus's flood
    under CI's load): nbclient's default 4 s wait for them lost the last ones, and the note."""
    read = LimitedExecute.output

    def slow(self, *args):
        time.sleep(0.3)
        return read(self, *args)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(LimitedExecute, "output", slow)
        return _run(
            tmp_path_factory.mktemp("slow"),
            _notebook("for i in range(30):\n    print('x' * 200, flush=True)", "print('after')"),
            max_output_bytes=6000,
        )


def test_output_read_after_the_reply_still_counts_and_is_noted(read_slowly):
    assert _stream(read_slowly.cells[0], "stderr") == "\n[output truncated: over 6000 bytes]\n"
    assert _stream(read_slowly.cells[1], "stdout") == "after\n"


# ------------------------------------------------------------ submission_timeout
@pytest.fixture(scope="module")
def timed_out(tmp_path_factory):
    """Kernel start 2: the kit's clock (and only the kit's) says the first cell took 1000 s
    of the submission's 900: the second is not run."""
    ticks = iter([0.0, 0.0])  # preprocess's start, then the first cell's check
    clock = types.SimpleNamespace(monotonic=lambda: next(ticks, 1000.0))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(limited_execute, "time", clock)
        return _run(
            tmp_path_factory.mktemp("timeout"),
            _notebook("x = 1\nprint(x)", "print('late')"),
            submission_timeout=900,
        )


def test_cell_before_submission_timeout_runs(timed_out):
    assert _stream(timed_out.cells[0], "stdout") == "1\n"


def test_cell_after_submission_timeout_is_marked_not_run(timed_out):
    assert _errors(timed_out.cells[1]) == [
        ("NotRun", "this cell was not run: the submission's 900 s were used up")
    ]


# ------------------------------------------------------------ a kernel that dies
@pytest.fixture(scope="module")
def died(tmp_path_factory):
    """Kernel start 3: the first cell ends the kernel's process."""
    return _run(
        tmp_path_factory.mktemp("died"),
        _notebook("print('before')", "import os; os._exit(1)", "print('never')"),
    )


def test_cell_that_kills_the_kernel_gets_dead_kernel_error(died):
    assert [e for e, _ in _errors(died.cells[1])] == ["DeadKernelError"]


def test_cells_after_a_dead_kernel_are_marked_not_run(died):
    assert _errors(died.cells[2]) == [
        (
            "NotRun",
            "this cell was not run: the kernel died (an exit, a crash or "
            "the memory limit) in an earlier cell",
        )
    ]


def test_cells_before_a_dead_kernel_keep_their_output(died):
    assert _stream(died.cells[0], "stdout") == "before\n"


# ------------------------------------------------------------ max_total_output_bytes
TOTAL_LIMIT = 1500


@pytest.fixture(scope="module")
def over_total(tmp_path_factory):
    """Kernel start 4: two cells of ~1 kB each; the submission may keep 1.5 kB."""
    return _run(
        tmp_path_factory.mktemp("total"),
        _notebook("print('a' * 1000)", "print('b' * 1000)"),
        max_total_output_bytes=TOTAL_LIMIT,
        max_output_bytes=100_000,
    )


def test_output_within_the_total_is_kept(over_total):
    assert _stream(over_total.cells[0], "stdout") == "a" * 1000 + "\n"


def test_output_past_max_total_output_bytes_is_dropped_with_a_note(over_total):
    assert (_stream(over_total.cells[1], "stdout"), _stream(over_total.cells[1], "stderr")) == (
        "",
        f"\n[output dropped: the submission's outputs are over {TOTAL_LIMIT} bytes in all]\n",
    )


# ------------------------------------------------------------ cells after the last graded one
def _graded(source: str, **meta):
    cell = new_code_cell(source)
    cell.metadata["nbgrader"] = {"grade_id": meta.pop("grade_id", "c"), **meta}
    return cell


@pytest.fixture(scope="module", params=[False, True], ids=["default", "run_show_only"])
def shown(request, tmp_path_factory):
    """Kernel starts 5 and 6: an answer, a graded cell, then a locked cell that writes a file."""
    tmp = tmp_path_factory.mktemp("show")
    nb = _notebook()
    nb.cells = [
        _graded("x = 1", grade_id="answer", solution=True, grade=False, locked=False),
        _graded("print('graded', x)", grade_id="test", solution=False, grade=True, locked=True, points=1),
        _graded("open('shown', 'w').write('y'); print('shown')", grade_id="after", locked=True),
    ]
    return request.param, tmp, _run(tmp, nb, run_show_only=request.param)


def test_cells_after_the_last_graded_one_are_noted_not_run(shown):
    run_show_only, tmp, nb = shown
    assert _stream(nb.cells[1], "stdout") == "graded 1\n"
    if run_show_only:
        assert _stream(nb.cells[2], "stdout") == "shown\n" and (tmp / "shown").exists()
    else:
        assert _stream(nb.cells[2], "stdout") == limited_execute.show_only.NOTE
        assert not (tmp / "shown").exists()


# ------------------------------------------------------------ a block of test cells, one round trip
KIT = {"nbgrader": {"assignment": spec.ASSIGNMENT}}
TESTS = ["print('one')\n1.0", "assert x == 2, 'x is not 2'", "print('three')\n0.5"]


@pytest.fixture(scope="module", params=["whole", "display broken"])
def tested(request, tmp_path_factory):
    """Kernel starts 7 and 8: an answer, then three hidden tests in a row; in the second, the
    answer breaks the kernel's display first, so the block's answer never comes back."""
    broken = "import IPython.display as d\nd.publish_display_data = lambda *a, **k: None\n"
    nb = _notebook()
    nb.cells = [
        _graded(
            ("x = 1\n" + broken) if request.param != "whole" else "x = 1",
            grade_id="answer",
            solution=True,
            locked=False,
        )
    ]
    nb.cells += [_graded(s, grade_id=f"t{k}", grade=True, locked=True, points=1) for k, s in enumerate(TESTS)]
    return request.param, _run(tmp_path_factory.mktemp("tests"), nb, KIT, warm_kernels=False)


def test_each_test_cell_of_a_block_gets_its_own_outputs(tested):
    how, nb = tested
    scores = [determine_grade(c, logging.getLogger())[0] for c in nb.cells[1:]]
    assert scores == [1.0, 0, 0.5]
    assert [_stream(c, "stdout") for c in nb.cells[1:]] == ["one\n", "", "three\n"]
    assert _errors(nb.cells[2]) == [("AssertionError", "x is not 2")]
    counts = {c.execution_count for c in nb.cells[1:]}
    assert len(counts) == (1 if how == "whole" else 3)  # one round trip, or one a cell as before
