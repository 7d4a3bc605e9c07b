"""An exercise written from its definition alone, end to end with real nbgrader (issue 21):
`backprop-ninja new tests/tiny_exercise.py COURSE` makes the course, `nbgrader
generate_assignment` releases it without solutions or hidden tests, and `nbgrader autograde`
grades three students gradient by gradient: the right answer, one gradient transposed, and a
cell that raises."""

from __future__ import annotations

import os
import subprocess

import nbformat
import pytest
from nbgrader.api import Gradebook

from conftest import ROOT, VENV_BIN, nbgrader
from tiny_exercise import TINY

EX1 = ["dlogprobs", "dprobs", "dlogits", "dW", "db"]
ANSWERS = {
    "s1_right": TINY.solution,
    "s2_transposed": TINY.solution.replace("dW = X.T @ dlogits", "dW = (X.T @ dlogits).T"),
    "s3_raises": "dlogprobs = torch.zeros_like(logprobs)\nraise ValueError('not yet')",
}


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    course = tmp_path_factory.mktemp("authored") / "course"
    made = subprocess.run(
        [str(VENV_BIN / "backprop-ninja"), "new", str(ROOT / "tests" / "tiny_exercise.py"), str(course)],
        env=dict(os.environ, PATH=f"{VENV_BIN}:{os.environ['PATH']}"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert made.returncode == 0, made.stdout + made.stderr
    nbgrader(course, "generate_assignment", "tiny", "--force")
    release = nbformat.read(course / "release" / "tiny" / "tiny.ipynb", 4)
    for student, answer in ANSWERS.items():
        nb = nbformat.from_dict(release)
        next(c for c in nb.cells if c.metadata["nbgrader"]["grade_id"] == "ex1_solution").source = answer
        (course / "submitted" / student / "tiny").mkdir(parents=True)
        nbformat.write(nb, course / "submitted" / student / "tiny" / "tiny.ipynb")
    nbgrader(course, "autograde", "tiny", "--force")
    return course, made.stdout


def test_new_makes_a_course_and_says_what_next(course):
    folder, said = course
    assert "nbgrader generate_assignment tiny" in said and "5 graded gradients" in said
    assert 'course_id = "tiny"' in (folder / "nbgrader_config.py").read_text()


def test_the_release_holds_no_solution_and_no_hidden_test(course):
    text = (course[0] / "release" / "tiny" / "tiny.ipynb").read_text()
    assert "BEGIN SOLUTION" not in text and "grade_gradient" not in text and "dW = X.T" not in text
    assert "raise NotImplementedError()" in text and "def cmp(s, dt, t)" in text


def test_each_gradient_is_graded_on_its_own(course):
    with Gradebook(f"sqlite:///{course[0] / 'gradebook.db'}") as gb:
        scores = {
            s: {g.name: float(g.score) for g in gb.find_submission_notebook("tiny", "tiny", s).grades}
            for s in ANSWERS
        }
    assert scores == {
        "s1_right": {f"ex1_{x}": 1.0 for x in EX1},
        "s2_transposed": {f"ex1_{x}": 0.0 if x == "dW" else 1.0 for x in EX1},
        "s3_raises": {f"ex1_{x}": 0.0 for x in EX1},
    }
    shown = (course[0] / "autograded" / "s2_transposed" / "tiny" / "tiny.ipynb").read_text()
    assert "FAIL ex1_dW: 0/1 points" in shown and "PASS ex1_db: 1/1 points" in shown
