"""An exercise written from its definition alone, end to end with real nbgrader (issue 21):
`backprop-ninja new tests/tiny_exercise.py COURSE` makes the course, `nbgrader
generate_assignment` releases it without solutions or hidden tests, and `nbgrader autograde`
grades four students gradient by gradient, by the kit's replay in the sandbox: the right answer,
one gradient transposed, a cell that raises, and autograd's answer read in the kernel (right
there, nothing in the replay). Then the kit's second assignment, the GPT block, goes into the same course by
its name and gives the instructor's answers every one of its 63 points."""

from __future__ import annotations

import json
import os
import subprocess

import nbformat
import pytest
from nbgrader.api import Gradebook

from grader.exercise.definitions.gpt_block import GPT_BLOCK as GPT

from conftest import ROOT, VENV_BIN, nbgrader
from tiny_exercise import TINY

EX1 = ["dlogprobs", "dprobs", "dlogits", "dW", "db"]
ANSWERS = {
    "s1_right": TINY.solution,
    "s2_transposed": TINY.solution.replace("dW = X.T @ dlogits", "dW = (X.T @ dlogits).T"),
    "s3_raises": "dlogprobs = torch.zeros_like(logprobs)\nraise ValueError('not yet')",
    # autograd's answer, read in the student's kernel: right there, refused by the replay
    "s4_reads_grad": TINY.solution.replace("dW = X.T @ dlogits", "dW = W.grad.clone()"),
}


@pytest.fixture(scope="module")
def course(tmp_path_factory, names_txt):
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
    nbgrader(course, "generate_feedback", "tiny", "--force")
    _gpt_block_beside(course, names_txt)
    return course, made.stdout


def _gpt_block_beside(course, names_txt):
    """The kit's second assignment into the same course by its name; one student submits the
    instructor's answers to its three exercises."""
    made = subprocess.run(
        [str(VENV_BIN / "backprop-ninja"), "new", "gpt_block", str(course)],
        env=dict(os.environ, PATH=f"{VENV_BIN}:{os.environ['PATH']}", NAMES_TXT=str(names_txt)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert made.returncode == 0, made.stdout + made.stderr
    assert "nbgrader_config.py" not in made.stdout  # the course's own configuration is kept
    nbgrader(course, "generate_assignment", "gpt_block", "--force")
    nb = nbformat.read(course / "release" / "gpt_block" / "gpt_block.ipynb", 4)
    for cell in nb.cells:
        exercise = {"ex1_solution": GPT, **{f"ex{g.exercise}_solution": g for g in GPT.in_one_go}}
        if cell.metadata["nbgrader"]["grade_id"] in exercise:
            cell.source = exercise[cell.metadata["nbgrader"]["grade_id"]].solution
    (course / "submitted" / "s1_right" / "gpt_block").mkdir(parents=True)
    nbformat.write(nb, course / "submitted" / "s1_right" / "gpt_block" / "gpt_block.ipynb")
    nbgrader(course, "autograde", "gpt_block", "--force")


def test_new_makes_a_course_and_says_what_next(course):
    folder, said = course
    assert "nbgrader generate_assignment tiny" in said and "5 graded gradients" in said
    assert 'course_id = "tiny"' in (folder / "nbgrader_config.py").read_text()


def test_the_release_holds_no_solution_and_no_hidden_test(course):
    text = (course[0] / "release" / "tiny" / "tiny.ipynb").read_text()
    assert "BEGIN SOLUTION" not in text and "grade_gradient" not in text and "dW = X.T" not in text
    assert "raise NotImplementedError()" in text and "def cmp(s, dt, t)" in text


def _scores(course, assignment: str, students) -> dict:
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        return {
            s: {g.name: float(g.score) for g in gb.find_submission_notebook(assignment, assignment, s).grades}
            for s in students
        }


def test_each_gradient_is_graded_on_its_own(course):
    scores = _scores(course[0], "tiny", ANSWERS)
    assert scores == {
        "s1_right": {f"ex1_{x}": 1.0 for x in EX1},
        "s2_transposed": {f"ex1_{x}": 0.0 if x == "dW" else 1.0 for x in EX1},
        "s3_raises": {f"ex1_{x}": 0.0 for x in EX1},
        "s4_reads_grad": {f"ex1_{x}": 0.0 if x == "dW" else 1.0 for x in EX1},
    }
    shown = (course[0] / "autograded" / "s2_transposed" / "tiny" / "tiny.ipynb").read_text()
    assert "FAIL ex1_dW: 0/1 points" in shown and "PASS ex1_db: 1/1 points" in shown
    assert "hint: transposed: you have (5, 3), expected (3, 5)" in shown  # the judge's, not the kernel's


def test_the_replay_grades_it_and_autograds_answer_earns_nothing(course):
    records = course[0] / "reports" / "replay-tiny"
    assert sorted(p.stem for p in records.glob("*.json")) == sorted(ANSWERS)
    cheat = json.loads((records / "s4_reads_grad.json").read_text())
    assert cheat["verdicts"]["ex1_dW"]["score"] == 0 and cheat["problems"] == []
    assert any(f["kind"] == "autograd" and "reads .grad" in f["evidence"] for f in cheat["flags"])
    assert not (course[0] / "reports" / "replay").exists()  # Backprop Ninja's records stay its own


def test_the_gpt_block_beside_it_in_the_same_course_gives_every_point(course):
    scores = _scores(course[0], "gpt_block", ["s1_right"])["s1_right"]
    assert scores == {g.grade_id: g.points for g in GPT.gradients()} and sum(scores.values()) == 63
    assert set(_scores(course[0], "tiny", ["s1_right"])["s1_right"].values()) == {1.0}  # tiny kept


def test_the_feedback_opens_with_each_gradients_verdict(course):
    page = (course[0] / "feedback" / "s2_transposed" / "tiny" / "tiny.html").read_text()
    assert page.index('id="kit-summary"') < page.index('id="notebook-container"')
    summary = page[page.index('id="kit-summary"') : page.index('id="notebook-container"')]
    assert all(f'<a href="#ex1_{x}"><code>{x}</code></a>' in summary for x in EX1)
    assert "transposed" in summary and "grade_gradient" not in page  # the hidden test is gone
