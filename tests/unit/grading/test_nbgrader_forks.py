"""grader/grading/nbgrader_forks.py with a real nbgrader: the batch's nbgrader processes are
forks of one server that has imported nbgrader, torch and the judge, each reports its exit
status, and none outlives the server or the batch."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from grader.grading.nbgrader_forks import Forks

pytestmark = pytest.mark.integration  # starts a Python that imports nbgrader and torch

SLEEPS = "import time\ntime.sleep(120)\n"  # a course configuration that keeps a command running
ASLEEP = ("autograde", "nothing")  # a command that reads the configuration (--version does not)


@pytest.fixture
def forks(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "4")  # a shell's: the server still forks
    f = Forks(tmp_path, tmp_path / "server.log")
    yield f
    f.close()


def _maps(pid: int) -> str:
    return Path(f"/proc/{pid}/maps").read_text()


def _gone(pid: int, seconds: float = 30) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if state == "Z":  # ended, its parent yet to reap it
            return True
        time.sleep(0.05)
    return False


def test_each_command_is_a_fork_of_the_server_that_imported_torch(forks, tmp_path):
    first = forks.start("--version", log=tmp_path / "a.log")
    second = forks.start("autograde", "nothing", log=tmp_path / "b.log")
    server = forks.proc.pid
    assert "libtorch_cpu" in _maps(server)  # imported once, before any fork
    assert first.wait(timeout=60) == 0 and second.wait(timeout=60) == 1
    assert "nbgrader version" in (tmp_path / "a.log").read_text()
    assert "No notebooks were matched" in (tmp_path / "b.log").read_text()
    assert len({server, first.pid, second.pid}) == 3 and forks.proc.pid == server


def test_a_fork_stopped_with_its_process_group_reports_the_signal(forks, tmp_path):
    (tmp_path / "nbgrader_config.py").write_text(SLEEPS)
    fork = forks.start(*ASLEEP, log=tmp_path / "a.log")
    assert fork.poll() is None
    assert os.getpgid(fork.pid) == fork.pid  # a session of its own: the batch stops it by its group
    os.killpg(fork.pid, signal.SIGTERM)
    assert fork.wait(timeout=60) == -signal.SIGTERM


def test_closing_the_server_ends_its_forks(forks, tmp_path):
    (tmp_path / "nbgrader_config.py").write_text(SLEEPS)
    fork = forks.start(*ASLEEP, log=tmp_path / "a.log")
    server = forks.proc
    forks.close()
    assert server.returncode == 0 and _gone(fork.pid, 5)


def test_a_fork_dies_with_a_killed_server(forks, tmp_path):
    (tmp_path / "nbgrader_config.py").write_text(SLEEPS)
    fork = forks.start(*ASLEEP, log=tmp_path / "a.log")
    os.kill(forks.proc.pid, signal.SIGKILL)
    forks.proc.wait()
    assert _gone(fork.pid) and fork.poll() == -1  # nothing said of it: not taken for graded
    again = forks.start("--version", log=tmp_path / "b.log")  # a new server for the next share
    assert again.wait(timeout=60) == 0 and "nbgrader version" in (tmp_path / "b.log").read_text()
