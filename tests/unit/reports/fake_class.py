"""A small graded class without nbgrader's commands: a gradebook built through nbgrader's API
and hand-written replay records, for the report's and the exports' unit tests."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

from nbgrader.api import Gradebook

from grader.exercise import spec

# a student id and a hint quoting code that would act if pasted into HTML unescaped;
# "$...$" would be math text in a matplotlib label
HOSTILE = '<script>alert("id")</script>$x$'
HOSTILE_HINT = "values differ: you wrote <img src=x onerror=alert(1)> (maxdiff 0.25)"
BESSEL = "off by a factor of (n-1)/n: Bessel's correction, the variance divides by n-1, not n"

# student -> {grade id: (score, hint)} for the grade ids below full points
LOST: dict[str, dict[str, tuple[float, str]]] = {
    "ann": {},
    "ben": {"ex1_dbndiff2": (0.0, BESSEL), "ex3_dhprebn": (0.0, "Bessel's correction: n/(n-1)")},
    "cat": {
        "ex1_dbndiff2": (0.0, BESSEL),
        "ex4_dC": (0.0, "values differ from the reference (maxdiff 0.0673)"),
    },
    HOSTILE: {
        "ex4_dC": (0.0, "values differ from the reference (maxdiff 0.12)"),
        "ex4_dW1": (0.0, HOSTILE_HINT),
    },
}
NO_SUBMISSION = "dan"  # in the gradebook, never submitted
MANUAL = ("cat", "ex2_dlogits", 1.5)  # a TA's manual score, which overrides the autograder's


def expected(student: str) -> dict[str, float]:
    lost = LOST[student]
    out = {g.grade_id: lost[g.grade_id][0] if g.grade_id in lost else g.points for g in spec.GRADED}
    if student == MANUAL[0]:
        out[MANUAL[1]] = MANUAL[2]
    return out


@contextmanager
def _alembic_on_path():
    """A new gradebook runs `alembic`, from the virtualenv's bin/ (on PATH under make only)."""
    old = os.environ.get("PATH", "")
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{old}"
    try:
        yield
    finally:
        os.environ["PATH"] = old


_TEMPLATE = tempfile.TemporaryDirectory(prefix="fake_class_")  # removed when the tests end


def make_gradebook(course: Path) -> str:
    """COURSE/gradebook.db: a copy of one built once (a new gradebook costs seconds of alembic)."""
    template = Path(_TEMPLATE.name) / "gradebook.db"
    if not template.exists():
        _build_gradebook(f"sqlite:///{template}")
    course.mkdir(parents=True, exist_ok=True)
    shutil.copy(template, course / "gradebook.db")
    return f"sqlite:///{course / 'gradebook.db'}"


def _build_gradebook(url: str) -> None:
    with _alembic_on_path(), Gradebook(url) as gb:
        gb.add_assignment(spec.ASSIGNMENT)
        gb.add_notebook(spec.NOTEBOOK, spec.ASSIGNMENT)
        for g in spec.GRADED:
            gb.add_grade_cell(
                g.grade_id, spec.NOTEBOOK, spec.ASSIGNMENT, max_score=g.points, cell_type="code"
            )
        for student in [*LOST, NO_SUBMISSION]:
            gb.add_student(
                student, first_name=student.title(), last_name="Doe", email=f"{student}@uni.example"
            )
        for student in LOST:
            gb.add_submission(spec.ASSIGNMENT, student)
            for gid, points in expected(student).items():
                gb.find_grade(gid, spec.NOTEBOOK, spec.ASSIGNMENT, student).auto_score = points
        student, gid, score = MANUAL
        grade = gb.find_grade(gid, spec.NOTEBOOK, spec.ASSIGNMENT, student)
        grade.auto_score, grade.manual_score = 2.0, score
        gb.db.commit()


def record(student: str) -> dict:
    verdicts = {}
    for g in spec.GRADED:
        score, hint = LOST[student].get(g.grade_id, (g.points, None))
        verdicts[g.grade_id] = {
            "score": score,
            "max_score": g.points,
            "carried": False,
            "hint": hint,
            "lines": [],
        }
    flags = (
        [{"kind": "introspection", "evidence": "the <b>reference</b> was imported", "grade_ids": []}]
        if student == HOSTILE
        else []
    )
    return {
        "student": student,
        "seed": 1,
        "replay_seconds": 2.5 if student == "ben" else 1.25,
        "score": sum(v["score"] for v in verdicts.values()),
        "max_score": spec.total_points(),
        "problems": ["run ex4: timeout"] if student == "ben" else [],
        "flags": flags,
        "findings": ["reads grader/reference/steps.py"] if flags else [],
        "verdicts": verdicts,
    }


def make_class(course: Path) -> Path:
    """The gradebook, a replay record per submission, the batch's log and summary."""
    course.mkdir(parents=True, exist_ok=True)
    make_gradebook(course)
    replay = course / "reports" / "replay"
    replay.mkdir(parents=True)
    for i, student in enumerate(LOST):
        (replay / f"student{i}.json").write_text(json.dumps(record(student)))
    (course / "reports" / "autograde.log").write_text(
        "[12:00:00] 4 to grade, 0 graded before; 2 worker(s)\n[12:00:09] graded ben (1/4)\n"
        "\n===== nbgrader output: worker-1-1.log =====\nNBGRADER-NOISE\n"
    )
    (course / "reports" / "batch.json").write_text(
        json.dumps({"students": {"ben": {"preflight": ["your notebook was renamed"]}}, "seconds": 42.0})
    )
    return course
