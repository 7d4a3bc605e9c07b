"""LimitedExecute with a real warm kernel in the sandbox: the notebook's skippable first cells
go in one round trip (grader/preprocessors/prefix_block.py), and the notebook comes out as a
cold kernel leaves it: each cell's outputs and execution count, and `In`."""

from __future__ import annotations

import copy
import os

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook
from traitlets.config import Config

from grader import confine
from grader.confine import bwrap_works, warm
from grader.exercise import spec
from grader.preprocessors.limited_execute import LimitedExecute

pytestmark = [pytest.mark.integration, pytest.mark.skipif(not bwrap_works(), reason="needs bubblewrap")]

FIRST = [
    "%config Completer.use_jedi = False\nimport random",  # a magic: the kernel runs it
    "words = open('names.txt').read().split()\nprint(len(words))",
    "random.seed(42)\nrandom.shuffle(words)\nprint(words)",
    "n = len(words)",
]
REST = ["print(n, random.random())", "print(In[2].splitlines()[0], _i3.splitlines()[0])", "1 + 1"]


def _cell(source: str, **meta):
    cell = new_code_cell(source)
    cell.metadata["nbgrader"] = {"grade_id": meta.pop("grade_id"), "locked": True, **meta}
    return cell


def _notebook():
    nb = new_notebook(cells=[_cell(s, grade_id=f"first{k}") for k, s in enumerate(FIRST)])
    nb.cells.append(_cell(REST[0], grade_id="answer", solution=True, locked=False))
    nb.cells += [_cell(s, grade_id=f"test{k}", grade=True, points=1) for k, s in enumerate(REST[1:])]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """The kit's kernel spec and socket folders, as the course's nbgrader_config.py sets them; this
    process's warm server, none before and closed after (grader/confine/warm.py keeps one)."""
    env = pytest.MonkeyPatch()
    env.setattr(warm, "_SERVER", None)
    env.setattr(warm, "_REFUSED", None)
    here = os.path.join(os.path.dirname(confine.__file__), "jupyter")
    env.setenv("JUPYTER_PATH", os.pathsep.join([here, os.environ.get("JUPYTER_PATH", "")]))
    env.setenv("JUPYTER_RUNTIME_DIR", confine.prepare_runtime_dir())
    root = tmp_path_factory.mktemp("course")
    source = root / "source" / spec.ASSIGNMENT
    source.mkdir(parents=True)
    nbformat.write(_notebook(), source / f"{spec.NOTEBOOK}.ipynb")
    (source / "names.txt").write_text("emma\nolivia\nava\n")
    yield root
    if warm._SERVER:
        warm._SERVER.close()
    env.undo()


def _graded(course, student: str, warm: bool):
    """The notebook run as autograde runs it (in the student's folder), and how many cells were sent."""
    folder = course / "autograded" / student / spec.ASSIGNMENT
    folder.mkdir(parents=True)
    (folder / "names.txt").write_text("emma\nolivia\nava\n")
    c = Config()
    c.CourseDirectory.root = str(course)
    c.LimitedExecute.warm_kernels = warm
    c.KernelManager.transport = "ipc"
    c.KernelManager.ip = os.path.join(os.environ["JUPYTER_RUNTIME_DIR"], "kernel")
    pre = LimitedExecute(config=c, kernel_name="backprop-ninja-sandbox", timeout=60, startup_timeout=60)
    sent, execute = [], pre._execute
    pre._execute = lambda cell, *a, **k: sent.append(cell.source) or execute(cell, *a, **k)
    resources = {
        "nbgrader": {"assignment": spec.ASSIGNMENT, "notebook": spec.NOTEBOOK},
        "metadata": {"path": str(folder)},
    }
    nb = pre.preprocess(copy.deepcopy(_notebook()), resources)[0]
    return nb, sent


def _shown(nb) -> list:
    return [
        (c.execution_count, [(o.output_type, o.get("text") or o.get("data")) for o in c.outputs])
        for c in nb.cells
    ]


def test_the_first_cells_go_in_one_round_trip_and_come_out_as_a_cold_kernels(course):
    cold, sent_cold = _graded(course, "ann", warm=False)
    warm, sent_warm = _graded(course, "ben", warm=True)
    assert len(sent_cold) == len(FIRST) + 2  # the two tests in a block of their own
    assert len(sent_warm) == len(sent_cold) - 2  # the three skippable first cells: one cell
    assert "take(" in sent_warm[1]
    assert _shown(warm) == _shown(cold)
    assert [c.execution_count for c in warm.cells] == [1, 2, 3, 4, 5, 6, 6]
    assert warm.cells[1].outputs[0].text == "3\n"
    assert warm.cells[5].outputs[0].text == "words = open('names.txt').read().split() random.seed(42)\n"
