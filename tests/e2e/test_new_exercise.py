"""An exercise written from its definition alone, end to end with real nbgrader (issue 21):
`backprop-ninja new tests/tiny_exercise.py COURSE` makes the course, `nbgrader
generate_assignment` releases it without solutions or hidden tests, and `nbgrader autograde`
grades four students gradient by gradient, by the kit's replay in the sandbox: the right answer,
one gradient transposed, a cell that raises, and autograd's answer read in the kernel (right
there, nothing in the replay). Then the kit's second assignment, the GPT block, goes into the same course by
its name and gives the instructor's answers every one of its 81 points."""

from __future__ import annotations

import csv
import json
import os
import subprocess

import nbformat
import pytest
from nbgrader.api import Gradebook

from conftest import ROOT, VENV_BIN, nbgrader
from gpt_corpus import CASES, expected_scores, write_submissions
from tiny_exercise import TINY

EX1 = ["dlogprobs", "dprobs", "dlogits", "dW", "db"]
ANSWERS = {
    "s1_right": TINY.solution,
    "s2_transposed": TINY.solution.replace("dW = X.T @ dlogits", "dW = (X.T @ dlogits).T"),
    "s3_raises": "dlogprobs = torch.zeros_like(logprobs)\nraise ValueError('not yet')",
    # autograd's answer, read in the student's kernel: right there, refused by the replay
    "s4_reads_grad": TINY.solution.replace("dW = X.T @ dlogits", "dW = W.grad.clone()"),
}


def kit(*args: str, timeout: float = 300, **env: str) -> subprocess.CompletedProcess:
    """`backprop-ninja ARGS...` as an instructor or a TA runs it, the virtualenv's bin/ on PATH."""
    return subprocess.run(
        [str(VENV_BIN / "backprop-ninja"), *args],
        env=dict(os.environ, PATH=f"{VENV_BIN}:{os.environ['PATH']}", **env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def course(tmp_path_factory, names_txt):
    course = tmp_path_factory.mktemp("authored") / "course"
    made = kit("new", str(ROOT / "tests" / "tiny_exercise.py"), str(course))
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
    """The kit's second assignment into the same course by its name, and its corpus submitted."""
    made = kit("new", "gpt_block", str(course), NAMES_TXT=str(names_txt))
    assert made.returncode == 0, made.stdout + made.stderr
    assert "nbgrader_config.py" not in made.stdout  # the course's own configuration is kept
    nbgrader(course, "generate_assignment", "gpt_block", "--force")
    write_submissions(course, CASES)
    graded = kit("grade", str(course), "--assignment", "gpt_block", "--quiet", timeout=900)  # both cores
    assert graded.returncode == 0, graded.stdout + graded.stderr
    assert all(f"{c.student}: graded" in graded.stdout for c in CASES), graded.stdout
    assert "2 submission(s) with signs of cheating for a TA" in graded.stdout  # g08, g09


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


def test_the_gpt_blocks_release_asks_manual_backward_without_its_body(course):
    """nbgrader keeps the function's head and return around the stub, indented inside it."""
    release = nbformat.read(course[0] / "release" / "gpt_block" / "gpt_block.ipynb", 4)
    cell = next(c for c in release.cells if c.metadata["nbgrader"]["grade_id"] == "ex4_solution").source
    assert cell.startswith("# Exercise 4: your code\ndef manual_backward(\n    Xb, Yb, B, T, C, mask,")
    assert "):\n    # YOUR CODE HERE\n    raise NotImplementedError()\n    return [dwte, dwpe," in cell
    assert "dlnfraw" not in cell and "SOLUTION" not in cell  # no line of the body


def test_the_replay_grades_it_and_autograds_answer_earns_nothing(course):
    records = course[0] / "reports" / "replay-tiny"
    assert sorted(p.stem for p in records.glob("*.json")) == sorted(ANSWERS)
    cheat = json.loads((records / "s4_reads_grad.json").read_text())
    assert cheat["verdicts"]["ex1_dW"]["score"] == 0 and cheat["problems"] == []
    assert any(f["kind"] == "autograd" and "reads .grad" in f["evidence"] for f in cheat["flags"])
    assert not (course[0] / "reports" / "replay").exists()  # Backprop Ninja's records stay its own


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.student)
def test_the_gpt_block_corpus_beside_it_gets_its_grades(course, case):
    """Every score exact, in the same course as tiny; the cheats flagged, the hints naming the
    mistake, the carried errors credited."""
    assert _scores(course[0], "gpt_block", [case.student])[case.student] == expected_scores(case)
    record = json.loads((course[0] / "reports" / "replay-gpt_block" / f"{case.student}.json").read_text())
    assert record["problems"] == [] and set(case.flags) <= {f["kind"] for f in record["flags"]}
    assert case.carried <= {k for k, v in record["verdicts"].items() if v["carried"]}
    if case.hint:
        assert case.hint[1] in record["verdicts"][case.hint[0]]["hint"]


def test_the_feedback_opens_with_each_gradients_verdict(course):
    page = (course[0] / "feedback" / "s2_transposed" / "tiny" / "tiny.html").read_text()
    assert page.index('id="kit-summary"') < page.index('id="notebook-container"')
    summary = page[page.index('id="kit-summary"') : page.index('id="notebook-container"')]
    assert all(f'<a href="#ex1_{x}"><code>{x}</code></a>' in summary for x in EX1)
    assert "transposed" in summary and "grade_gradient" not in page  # the hidden test is gone


def test_the_batch_refuses_an_assignment_the_kit_does_not_grade(course, tmp_path):
    said = kit("grade", str(course[0]), "--assignment", "hw9")
    assert said.returncode == 2 and "hw9 is not an exercise the kit grades" in said.stderr
    assert "nbgrader autograde hw9" in said.stderr


def test_the_report_gives_the_written_exercises_table_csvs_and_class_page(course):
    said = kit("report", str(course[0]), "--assignment", "gpt_block")
    assert said.returncode == 0, said.stdout + said.stderr
    lines = {line.split()[0]: line.split()[1:] for line in said.stdout.splitlines() if line.startswith("g")}
    assert said.stdout.splitlines()[0].split() == [
        "student",
        "ex1",
        "/59",
        "ex2",
        "/2",
        "ex3",
        "/2",
        "ex4",
        "/18",
        "total",
        "/81",
    ]
    for case in CASES:
        scores = expected_scores(case)
        assert lines[case.student][-1] == f"{sum(scores.values()):g}", case.student
    with open(course[0] / "exports" / "gpt_block" / "gradients.csv") as f:
        rows = {r["student_id"]: r for r in csv.DictReader(f)}
    assert rows["g05_attention_key_untransposed"]["ex1_dk"] == "0" and rows["g01_right"]["total"] == "81"
    assert rows["s1_right"]["total"] == "0" and rows["s1_right"]["ex1_dk"] == ""  # tiny's, no GPT submission
    with open(course[0] / "exports" / "gpt_block" / "canvas.csv") as f:
        canvas = list(csv.reader(f))
    assert canvas[0][-1] == "A GPT block, backpropagated by hand" and canvas[1][-1] == "81"
    page = (course[0] / "reports" / "class-gpt_block.html").read_text()
    assert (
        "gpt_block: class report" in page
        and f"{len(CASES)} graded submissions" in page
        and "2 suspicious" in page
    )
    suspicious = page[page.index("id='suspicious'") :]
    assert "g08_reads_autograds_answer" in suspicious and "g09_torchs_softmax_backward" in suspicious
    assert "a factor of C/(C-1)" in page and "ex1_dln2diff2" in page  # the class's mistakes, by gradient
    assert (course[0] / "reports" / "class-gpt_block_heat_map.png").stat().st_size > 1000
    assert not (course[0] / "reports" / "class.html").exists()  # Backprop Ninja's page is its own
