"""Backprop Ninja and the GPT block in one course (issue 21): one `backprop-ninja grade` with both
assignments grades both, each by its own judge, with its own records, batch summary and log;
then each has its own report, exports and Gradescope zip. Real nbgrader, the demo class and two
of the GPT block's corpus."""

from __future__ import annotations

import json
import os
import subprocess
import zipfile

import pytest

from grader.exercise import spec
from grader.incoming.submissions import write_submissions
from grader.reference.backprop_ninja.samples import DEMO
from grader.reports.scores import read_scores

from conftest import VENV_BIN
from corpus import EXPECTED_ZEROS
from gpt_corpus import CASES, WRITTEN, expected_scores
from gpt_corpus import write_submissions as write_gpt_submissions

GPT_CASES = [c for c in CASES if c.student in ("g01_right", "g05_attention_key_untransposed")]


def kit(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(VENV_BIN / "backprop-ninja"), *args],
        env=dict(os.environ, PATH=f"{VENV_BIN}:{os.environ['PATH']}"),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def course(tmp_path_factory, new_course, names_txt):
    course = new_course(tmp_path_factory.mktemp("two") / "course")
    write_submissions(DEMO, course=course)
    made = kit("new", "gpt_block", str(course))
    assert made.returncode == 0, made.stdout + made.stderr
    from conftest import nbgrader

    nbgrader(course, "generate_assignment", "gpt_block", "--force")
    write_gpt_submissions(course, GPT_CASES)
    graded = kit(
        "grade", str(course), "--assignment", spec.ASSIGNMENT, "--assignment", "gpt_block", "--quiet"
    )
    assert graded.returncode == 0, graded.stdout + graded.stderr
    return course, graded.stdout


def test_one_batch_grades_both_each_by_its_own_judge(course):
    course, said = course
    ninja, gpt = said.split("== gpt_block ==")
    assert ninja.startswith(f"== {spec.ASSIGNMENT} ==")
    assert all(f"{s.student}: graded" in ninja for s in DEMO) and all(
        f"{c.student}: graded" in gpt for c in GPT_CASES
    )
    url = f"sqlite:///{course / 'gradebook.db'}"
    scores = {s.student: s.by_grade_id for s in read_scores(url)}
    for student, zeros in EXPECTED_ZEROS.items():  # the demo's grades, as the kit's own batch gives them
        assert scores[student] == {g.grade_id: 0.0 if g.grade_id in zeros else g.points for g in spec.GRADED}
    written = {s.student: s.by_grade_id for s in read_scores(url, WRITTEN)}
    assert {c.student: written[c.student] for c in GPT_CASES} == {
        c.student: expected_scores(c) for c in GPT_CASES
    }
    reports = course / "reports"
    assert sorted(p.stem for p in (reports / "replay").glob("*.json")) == sorted(s.student for s in DEMO)
    assert sorted(p.stem for p in (reports / "replay-gpt_block").glob("*.json")) == sorted(
        c.student for c in GPT_CASES
    )
    for log, summary, students in (
        ("autograde.log", "batch.json", DEMO),
        ("autograde-gpt_block.log", "batch-gpt_block.json", GPT_CASES),
    ):
        assert all(f"graded {s.student}" in (reports / log).read_text() for s in students), log
        assert sorted(json.loads((reports / summary).read_text())["students"]) == sorted(
            s.student for s in students
        )


def test_each_has_its_own_report_exports_and_gradescope_zip(course, tmp_path):
    course, _ = course
    for assignment, exports, page in (
        (spec.ASSIGNMENT, course / "exports", "class.html"),
        ("gpt_block", course / "exports" / "gpt_block", "class-gpt_block.html"),
    ):
        said = kit("report", str(course), "--assignment", assignment)
        assert said.returncode == 0, said.stdout + said.stderr
        assert (exports / "gradients.csv").is_file() and (course / "reports" / page).is_file()
        built = kit(
            "gradescope",
            "build",
            str(tmp_path / f"{assignment}.zip"),
            "--course",
            str(course),
            "--assignment",
            assignment,
        )
        assert built.returncode == 0, built.stdout + built.stderr
        with zipfile.ZipFile(tmp_path / f"{assignment}.zip") as z:
            settings = json.loads(z.read("gradescope.json"))
            assert settings["assignment"] == assignment
            assert f"course/source/{assignment}/{assignment}.ipynb" in z.namelist()
    with open(course / "exports" / "gpt_block" / "gradients.csv") as f:
        header = f.readline()
    assert "ex4_dwte" in header and "ex1_dC" not in header  # the GPT block's own columns
