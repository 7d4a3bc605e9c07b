"""grader/authoring/ in-process: the notebook an exercise's definition writes (its cells, grade
ids and points, the same bytes every time), the instructor's check of the solutions against
autograd, and the notebook's own cells run in order: the solution earns every point, a mistake
costs its gradient's point only and `cmp` says what is wrong."""

from __future__ import annotations

from dataclasses import replace

import nbformat
import pytest

from grader.authoring.check import problems
from grader.authoring.cmp_cell import feeds
from grader.authoring.notebook import instructor_notebook
from grader.exercise.definition import InOneGo, Step, Training

from authored_cells import run_cells
from conftest import ROOT
from tiny_exercise import TINY

EX1 = ["dlogprobs", "dprobs", "dlogits", "dW", "db"]


def _meta(nb):
    return [c.metadata["nbgrader"] for c in nb.cells]


def test_the_notebook_has_the_lectures_cells_and_one_grade_cell_a_gradient():
    nb = instructor_notebook(TINY)
    ids = [m["grade_id"] for m in _meta(nb)]
    assert ids == [
        *("intro", "imports", "data_md", "data", "cmp", "forward_md", "forward", "autograd"),
        *("ex1_md", "ex1_solution", "ex1_check"),
        *(f"ex1_{name}" for name in EX1),
    ]
    graded = [m for m in _meta(nb) if m["grade"]]
    assert [(m["grade_id"], m["points"], m["locked"]) for m in graded] == [
        (f"ex1_{x}", 1.0, True) for x in EX1
    ]
    assert [m["grade_id"] for m in _meta(nb) if m["solution"]] == ["ex1_solution"]
    assert all(m["locked"] for m in _meta(nb) if not m["solution"])
    cells = {m["grade_id"]: c.source for m, c in zip(_meta(nb), nb.cells)}
    assert 'grade_gradient("ex1_dW", globals(), points=1.0)' in cells["ex1_dW"]
    assert "### BEGIN HIDDEN TESTS" in cells["ex1_dW"] and "### BEGIN SOLUTION" in cells["ex1_solution"]
    assert cells["forward"].splitlines()[1:] == [f"{s.name} = {s.expr}" for s in TINY.steps]
    assert "Total: 5 points." in cells["intro"]
    nbformat.validate(nb)
    assert nbformat.writes(nb) == nbformat.writes(instructor_notebook(TINY))  # the same bytes again


def test_cmp_knows_what_each_gradient_is_computed_from():
    assert feeds(TINY) == {
        "logprobs": [],
        "probs": ["logprobs"],
        "logits": ["probs"],
        "W": ["logits"],
        "b": ["logits"],
    }


def test_the_solutions_are_checked_against_autograd(tmp_path):
    assert problems(TINY, tmp_path) == []
    wrong = replace(TINY, solution=TINY.solution.replace("X.T @ dlogits", "(X.T @ dlogits) / n"))
    (said,) = problems(wrong, tmp_path)  # one mistake, one gradient
    assert said.startswith("exercise 1: dW differs from autograd's by 0.")
    assert (
        problems(replace(TINY, solution="dW = 0"), tmp_path)[0]
        == "exercise 1: dlogprobs is not a tensor of shape (8, 5)"
    )


def test_the_solution_earns_every_point_and_a_mistake_costs_its_gradient_only():
    nb = instructor_notebook(TINY)
    scores, _ = run_cells(nb)
    assert scores == {f"ex1_{x}": 1.0 for x in EX1}
    transposed = TINY.solution.replace("dW = X.T @ dlogits", "dW = (X.T @ dlogits).T")
    scores, said = run_cells(nb, transposed)
    assert scores == {f"ex1_{x}": 0.0 if x == "dW" else 1.0 for x in EX1}
    assert "W               | shape (5, 3), expected (3, 5): transposed?" in said
    assert "FAIL ex1_dW: 0/1 points" in said


def test_an_in_one_go_exercise_gets_its_section_and_a_wrong_start_is_refused():
    two = replace(TINY, in_one_go=(InOneGo(2, "logits", "loss", 2.0, "Softmax and cross entropy in one go"),))
    cells = {
        m["grade_id"]: c.source
        for m, c in zip(_meta(instructor_notebook(two)), instructor_notebook(two).cells)
    }
    assert "## Exercise 2: Softmax and cross entropy in one go (2 points)" in cells["ex2_md"]
    assert (
        "probs = F.softmax(logits, 1)\nlogprobs = probs.log()\nloss = -logprobs[range(n), y].mean()"
        in cells["ex2_md"]
    )
    assert 'grade_gradient("ex2_dlogits", globals(), points=2.0)' in cells["ex2_dlogits"]
    reread = (*TINY.steps[:-1], Step("loss", "-logprobs[range(n), y].mean() + logits.sum()"))
    with pytest.raises(ValueError, match="'logits' reaches the loss other than through 'probs'"):
        replace(TINY, steps=reread, in_one_go=(InOneGo(2, "logits", "probs", 1.0),))


def test_the_readmes_example_is_the_tiny_exercise():
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("### Write your own exercise") :]
    example = section[section.index("```python\n") + 10 : section.index("\n```\n")]
    module = (ROOT / "tests" / "tiny_exercise.py").read_text()
    assert example.strip() == module[module.index("from grader.exercise.definition") :].strip()


TRAINED = replace(TINY, training=Training(2, learning_rate=0.5, steps=200))


def test_a_training_exercise_gets_its_section_cells_and_points(tmp_path):
    nb = instructor_notebook(TRAINED)
    ids = [m["grade_id"] for m in _meta(nb)]
    assert ids[ids.index("ex2_md") :] == [
        *("ex2_md", "ex2_solution", "ex2_check", "ex2_dW", "ex2_db", "ex2_train", "ex2_training")
    ]
    cells = dict(zip(ids, (c.source for c in nb.cells)))
    assert cells["ex2_solution"].startswith(
        "# Exercise 2: your code\ndef manual_backward(\n    X, y, n, logits,"
    )
    assert "    ### BEGIN SOLUTION\n    dlogprobs = torch.zeros_like(logprobs)" in cells["ex2_solution"]
    assert cells["ex2_solution"].endswith("    ### END SOLUTION\n    return [dW, db]")
    assert "grade_gradient(\"ex2_dW\", {'dW': ex2_grads.get('dW'), 'W': W}, points=1.0)" in cells["ex2_dW"]
    assert (
        "p.data += -lr * grad" in cells["ex2_train"]
        and "loss.backward()" not in cells["ex2_train"].split("\n", 1)[1]
    )
    assert (
        "| 2 | `manual_backward`: every parameter's gradient, then train the net with it | 3 |"
        in cells["intro"]
    )
    assert problems(TRAINED, tmp_path) == []  # manual_backward gives autograd's gradients


def test_the_training_exercise_earns_its_points_and_a_wrong_gradient_costs_its_own():
    nb = instructor_notebook(TRAINED)
    answer = next(c.source for m, c in zip(_meta(nb), nb.cells) if m["grade_id"] == "ex2_solution")
    scores, said = run_cells(nb)
    assert scores == {**{f"ex1_{x}": 1.0 for x in EX1}, "ex2_dW": 1.0, "ex2_db": 1.0, "ex2_training": 1.0}
    assert "PASS ex2_training" in said
    scores, said = run_cells(nb, {"ex2_solution": answer.replace("return [dW, db]", "return [dW, -db]")})
    assert (scores["ex2_dW"], scores["ex2_db"]) == (1.0, 0.0)
    scores, said = run_cells(nb, {"ex2_solution": answer.replace("return [dW, db]", "return [-dW, -db]")})
    assert scores["ex2_training"] == 0.0 and "FAIL ex2_training" in said  # the loss rises: no point


def test_the_autograders_kernel_trains_a_short_run(monkeypatch):
    """Under nbgrader the kernel's loop is show-only (the replay trains and decides): 100 steps."""
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    scores, said = run_cells(instructor_notebook(TRAINED))
    assert "   99/100:" in said and "/200:" not in said and scores["ex2_training"] == 1.0
