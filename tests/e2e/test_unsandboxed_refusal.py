"""Issue 17, point 4, outside Gradescope: where bubblewrap cannot start (a bwrap on PATH that
exits 1), `backprop-ninja grade` and plain `nbgrader autograde` refuse with the real reason
and grade nothing; `--allow-unsandboxed` grades, with the warning in the record."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys

import pytest

from grader.incoming.submissions import Sample, write_submissions
from grader.reports.scores import read_scores

from conftest import VENV_BIN


@pytest.fixture(scope="module")
def setup(tmp_path_factory, new_course):
    course = new_course(tmp_path_factory.mktemp("unsandboxed-course"))
    write_submissions([Sample("alice", "reference")], course=course)
    fake = tmp_path_factory.mktemp("failing-bwrap")
    (fake / "bwrap").write_text("#!/bin/sh\nexit 1\n")
    (fake / "bwrap").chmod(0o755)
    env = dict(os.environ, PATH=os.pathsep.join([str(fake), str(VENV_BIN), os.environ["PATH"]]))
    env.pop("BACKPROP_NINJA_ALLOW_UNSANDBOXED", None)
    reason = f"{fake / 'bwrap'} does not work: `bwrap --version` exited 1 (no output)"
    return course, env, reason


def _run(course, env, *argv):
    return subprocess.run(argv, cwd=course, env=env, capture_output=True, text=True, timeout=1800)


def _graded(course) -> dict:
    return {s.student: s.by_grade_id for s in read_scores(f"sqlite:///{course / 'gradebook.db'}")}


def test_the_batch_refuses_before_any_worker(setup):
    course, env, reason = setup
    done = _run(
        course, env, sys.executable, "-m", "grader", "grade", str(course), "--quiet", "--workers", "1"
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith(f"not graded: the sandbox could not start ({reason}). Fix it")
    assert "--allow-unsandboxed" in done.stderr
    assert not (course / "autograded").exists() and "alice" not in _graded(course)


def test_nbgrader_refuses_each_submission(setup):
    course, env, reason = setup
    done = _run(course, env, str(VENV_BIN / "nbgrader"), "autograde", "backprop_ninja", "--force")
    assert done.returncode != 0
    assert f"not graded: the sandbox could not start ({reason})" in done.stdout + done.stderr
    with sqlite3.connect(course / "gradebook.db") as db:  # nbgrader made the rows; no score in them
        assert db.execute("SELECT count(*) FROM grade WHERE auto_score IS NOT NULL").fetchone() == (0,)
    assert not list((course / "autograded").rglob("*.ipynb"))
    assert not (course / "reports" / "replay" / "alice.json").exists()


def test_the_batch_grades_when_allowed(setup):
    course, env, reason = setup
    done = _run(
        course,
        env,
        sys.executable,
        "-m",
        "grader",
        "grade",
        str(course),
        "--allow-unsandboxed",
        "--quiet",
        "--workers",
        "1",
    )
    assert done.returncode == 0, (
        done.stdout + done.stderr + (course / "reports" / "autograde.log").read_text()
    )
    assert "WITHOUT a sandbox" in done.stderr and reason in done.stderr
    record = json.loads((course / "reports" / "replay" / "alice.json").read_text())
    assert record["score"] == 38
    assert record["problems"][0].startswith("WARNING: the bubblewrap sandbox could not start")
    assert record["problems"][0].endswith(f"Why: {reason}")
    assert sum(_graded(course)["alice"].values()) == 38
