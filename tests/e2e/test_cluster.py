"""Grading on a Dask cluster for real: a `dask scheduler` and two `dask worker` processes on
127.0.0.1, started here; the demo class graded through them by `backprop-ninja grade
--scheduler`, with the grades of the local path, the replay records, and feedback that works."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grader.exercise import spec
from grader.incoming.submissions import write_submissions
from grader.reference.backprop_ninja.samples import DEMO
from grader.reports.scores import read_scores

from conftest import nbgrader
from corpus import EXPECTED_ZEROS

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
