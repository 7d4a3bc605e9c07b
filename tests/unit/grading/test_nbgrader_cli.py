"""grader/grading/nbgrader_cli.py in-process (no nbgrader is started: subprocess is a fake): the
one way the kit runs nbgrader, and each caller's command, folder, environment and options, as
each built them itself before (resident.py for a cluster worker, gradescope/course.py), and the
batch's nbgrader server (nbgrader_forks.py), which forks each worker's nbgrader."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from grader.gradescope import course as gradescope_course
from grader.grading import nbgrader_cli, nbgrader_forks, resident, workers
from grader.grading.nbgrader_cli import BIN, nbgrader_call

NBGRADER = [sys.executable, "-m", "grader.grading.nbgrader_main"]
VENV_PATH = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"


@pytest.fixture
def started(monkeypatch):
    """Every subprocess.run and Popen the kit makes: its keyword arguments; nothing runs."""
    calls = []

    def fake(args=None, **options):
        calls.append({"args": args, **options})
        return subprocess.CompletedProcess(args, 0, stdout="", stderr="")

    monkeypatch.setattr(subprocess, "run", fake)
    monkeypatch.setattr(subprocess, "Popen", fake)
    return calls


def test_the_call_is_this_pythons_nbgrader_in_the_course_with_its_bin_first_on_path(tmp_path):
    call = nbgrader_call(tmp_path, "autograde", "a1")
    assert call["args"] == [*NBGRADER, "autograde", "a1"] and call["cwd"] == tmp_path
    assert call["env"] == dict(os.environ, PATH=VENV_PATH)
    more = nbgrader_call(tmp_path, "x", more_bins=["/opt/bin"])
    assert more["env"]["PATH"] == os.pathsep.join([str(BIN), "/opt/bin", os.environ.get("PATH", "")])


def test_run_passes_its_options_to_subprocess_run(tmp_path, started):
    nbgrader_cli.run_nbgrader(tmp_path, "export", capture_output=True, timeout=5)
    assert started == [
        {
            "args": [*NBGRADER, "export"],
            "cwd": tmp_path,
            "env": dict(os.environ, PATH=VENV_PATH),
            "capture_output": True,
            "timeout": 5,
        }
    ]


def test_a_workers_share_is_asked_of_the_batchs_nbgrader_server(tmp_path, monkeypatch):
    forks = nbgrader_forks.Forks(tmp_path, tmp_path / "logs" / "worker-server.log")
    asked = []
    monkeypatch.setattr(forks, "start", lambda *args, log: asked.append((args, log)))
    share = workers.Share(["b"], tmp_path / "logs" / "worker-1-0.log")
    workers._start(forks, share, ["a", "b"], force=True, extra=["--X=1"])
    exclude = "--CourseDirectory.student_id_exclude=a"
    assert asked == [(("autograde", "backprop_ninja", exclude, "--force", "--X=1"), share.log)]


def test_the_batchs_nbgrader_server_is_this_pythons(tmp_path, started):
    nbgrader_forks.Forks(tmp_path, tmp_path / "server.log")._start()
    (call,) = started
    assert call["args"] == [NBGRADER[0], "-m", "grader.grading.nbgrader_forks"]
    assert (call["cwd"], call["env"]) == (tmp_path, dict(os.environ, PATH=VENV_PATH))
    assert call["start_new_session"] is True and call["stderr"].name == str(tmp_path / "server.log")


def test_a_cluster_workers_resident_nbgrader_is_this_pythons(tmp_path, started):
    resident.Resident(tmp_path, tmp_path / "log")._start()
    (call,) = started
    assert call["args"][:3] == [*NBGRADER[:1], "-m", "grader.grading.resident"]
    assert (call["cwd"], call["env"]) == (tmp_path, dict(os.environ, PATH=VENV_PATH))


def test_gradescope_runs_this_pythons_nbgrader_as_before(tmp_path, started):
    gradescope_course.nbgrader(tmp_path, "autograde", "a1", log=tmp_path / "log" / "nbgrader.log")
    db = f"--CourseDirectory.db_url=sqlite:///{tmp_path / 'gradebook.db'}"
    bins = [str(Path(sys.executable).parent), sysconfig.get_path("scripts")]
    argv = [*NBGRADER, "autograde", "a1", db]
    assert started == [
        {
            "args": argv,
            "cwd": tmp_path,
            "env": dict(os.environ, PATH=os.pathsep.join([*bins, os.environ.get("PATH", "")])),
            "capture_output": True,
            "text": True,
            "timeout": gradescope_course.AUTOGRADE_SECONDS,
            "stdin": subprocess.DEVNULL,
        }
    ]
    assert (tmp_path / "log" / "nbgrader.log").read_text().startswith(f"$ {' '.join(argv)}\n")
