"""Grading on a Dask cluster for real: a `dask scheduler` and two `dask worker` processes on
127.0.0.1, started here; the demo class graded through them by `backprop-ninja grade
--scheduler`, with the grades of the local path, the replay records, and feedback that works."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

from grader.exercise import spec
from grader.incoming.submissions import write_submissions
from grader.reference.backprop_ninja.samples import DEMO
from grader.reports.scores import read_scores

from conftest import ROOT, nbgrader
from corpus import EXPECTED_ZEROS
from tiny_exercise import TINY

BIN = Path(sys.executable).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def scheduler(tmp_path_factory):
    pytest.importorskip("distributed")
    folder = tmp_path_factory.mktemp("dask")
    address = f"tcp://127.0.0.1:{_free_port()}"
    procs = []

    def start(*args: str, log: str) -> None:
        with open(folder / log, "w") as out:
            procs.append(
                subprocess.Popen(
                    [str(BIN / "dask"), *args],
                    cwd=folder,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )

    try:
        start(
            "scheduler",
            "--host",
            "127.0.0.1",
            "--port",
            address.rsplit(":", 1)[1],
            "--no-dashboard",
            log="scheduler.log",
        )
        for k in (1, 2):  # no shared folder: each worker works in a folder of its own
            start(
                "worker",
                address,
                "--nthreads",
                "1",
                "--no-dashboard",
                "--local-directory",
                str(folder / f"w{k}"),
                log=f"worker{k}.log",
            )
        _wait_for_workers(address, 2)
        yield address
    finally:
        for proc in procs:
            os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            proc.wait(timeout=60)


def _wait_for_workers(address: str, n: int) -> None:
    from distributed import Client

    with Client(address, timeout=60) as client:
        client.wait_for_workers(n, timeout=120)


def test_a_class_graded_on_the_cluster(tmp_path, new_course, scheduler):
    course = new_course(tmp_path / "course")
    write_submissions(DEMO, course=course)
    t0 = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "grader", "grade", str(course), "--scheduler", scheduler, "--quiet"],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    print(f"cluster batch: {time.monotonic() - t0:.1f} s")
    scores = {s.student: s.by_grade_id for s in read_scores(f"sqlite:///{course / 'gradebook.db'}")}
    for student, zeros in EXPECTED_ZEROS.items():  # the local path's grades (test_autograde.py)
        assert scores[student] == {g.grade_id: 0.0 if g.grade_id in zeros else g.points for g in spec.GRADED}
        assert (course / "reports" / "replay" / f"{student}.json").is_file()
    nbgrader(course, "generate_feedback", "backprop_ninja", "--force")
    page = (course / "feedback" / "carol" / spec.ASSIGNMENT / f"{spec.NOTEBOOK}.html").read_text()
    assert "FAIL ex1_dcounts: 0/1 points" in page


def test_a_written_exercise_graded_on_the_cluster(tmp_path, new_course, scheduler):
    """An exercise written from its definition goes to the workers by its name: its source (the
    definition in its metadata) with it, its records back in reports/replay-tiny/. 16 students on
    2 workers go as 10 tasks, the largest first, each task a command of its worker's resident nbgrader."""
    course = new_course(tmp_path / "course")
    made = _kit("new", str(ROOT / "tests" / "tiny_exercise.py"), str(course))
    assert made.returncode == 0, made.stdout + made.stderr
    nbgrader(course, "generate_assignment", "tiny", "--force")
    release = nbformat.read(course / "release" / "tiny" / "tiny.ipynb", 4)
    transposed = TINY.solution.replace("dW = X.T @ dlogits", "dW = dlogits.T @ X")
    answers = {
        f"{kind}{k}": a
        for k in range(8)
        for kind, a in (("right", TINY.solution), ("transposed", transposed))
    }
    for student, answer in answers.items():
        nb = nbformat.from_dict(release)
        next(c for c in nb.cells if c.metadata["nbgrader"]["grade_id"] == "ex1_solution").source = answer
        (course / "submitted" / student / "tiny").mkdir(parents=True)
        nbformat.write(nb, course / "submitted" / student / "tiny" / "tiny.ipynb")
    done = _kit("grade", str(course), "--assignment", "tiny", "--scheduler", scheduler, "--quiet")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        scores = {
            s: {g.name: float(g.score) for g in gb.find_submission_notebook("tiny", "tiny", s).grades}
            for s in answers
        }
    ex1 = [g.grade_id for g in TINY.gradients()]
    assert scores == {
        s: {g: 0.0 if g == "ex1_dW" and s.startswith("transposed") else 1.0 for g in ex1} for s in answers
    }
    records = course / "reports" / "replay-tiny"
    assert sorted(p.stem for p in records.glob("*.json")) == sorted(answers)
    assert (
        "transposed" in json.loads((records / "transposed3.json").read_text())["verdicts"]["ex1_dW"]["hint"]
    )
    assert not (course / "reports" / "replay").exists()
    log = (course / "reports" / "autograde-tiny.log").read_text()
    assert "16 to grade" in log and "trying them once more" not in log  # every task brought its students back


def _kit(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "grader", *args], capture_output=True, text=True, timeout=1200
    )
