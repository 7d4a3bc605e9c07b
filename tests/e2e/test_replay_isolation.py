"""The replay's process boundary, for real: each run in namespaces of its own behind a
non-dumpable server (grader/untrusted/server.py), answers bound to requests. Real forks, real
torch, the real judge; the sandboxed variant needs bubblewrap. (The client's side of the
protocol, against fake servers: tests/unit/replay/test_client.py.)"""

from __future__ import annotations

import os
import time
from pathlib import Path

import nbformat
import pytest

from grader.confine import bwrap_works, default_sandbox
from grader.exercise import spec
from grader.incoming.submissions import fill, reference_answers
from grader.replay.client import launch_plain
from grader.settings import JudgeSettings, seed_for
from grader.verdicts.judge import judge_submission

from conftest import ROOT

FULL = spec.total_points()
MARK = "4242.125"  # a daemon's sleep argument: findable in /proc afterwards


@pytest.fixture(scope="module")
def notebooks():
    return (
        nbformat.read(ROOT / "source" / spec.ASSIGNMENT / f"{spec.NOTEBOOK}.ipynb", 4),
        nbformat.read(ROOT / "release" / spec.ASSIGNMENT / f"{spec.NOTEBOOK}.ipynb", 4),
    )


@pytest.fixture(params=["plain", "sandboxed"])
def grade(request, notebooks, names_txt):
    if request.param == "sandboxed" and not bwrap_works():
        pytest.skip("bubblewrap is needed (.ci/run installs it)")
    # the plain variant says so: judge_submission's default is the sandbox
    how = {"sandbox": default_sandbox()} if request.param == "sandboxed" else {"launcher": launch_plain}
    source, release = notebooks

    def grade(student: str, cell: str | None = None):
        nb = fill(release, reference_answers(source), [("ex1_solution", cell)] if cell else [])
        settings = JudgeSettings(seed=seed_for(student, "isolation"), run_timeout=20)
        record = judge_submission(nb.cells, student=student, settings=settings, names_txt=names_txt, **how)
        return sum(v.score for v in record.verdicts.values()), record

    return grade


NATIVE = """import _json, importlib.util, os, shutil
os.makedirs('/tmp/native', exist_ok=True)
shutil.copy(_json.__file__, '/tmp/native/_json.so')
_spec = importlib.util.spec_from_file_location('_json', '/tmp/native/_json.so')
if importlib.util.module_from_spec(_spec):  # one statement: n changes only if the load worked
    n = n + 1  # exercises 2 and 3 would fail
"""


def test_a_run_cannot_load_native_code_it_wrote(grade):
    """A .so written by the run (here a copy of one of Python's own) cannot be mapped: native
    code would be out of reach of every check the replay makes in Python."""
    score, record = grade("native", NATIVE)
    assert score == FULL, record.verdicts["ex1_dW1"].lines


def _alive(mark: str) -> list[str]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if mark.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
        except OSError:
            pass
    return found


DAEMON = f"""
import os, signal
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        os.execv("/bin/sleep", ["sleep", "{MARK}"])
    os._exit(0)
"""


def test_nothing_a_run_starts_outlives_it(grade):
    score, _ = grade("daemon", DAEMON)
    assert score == FULL
    time.sleep(0.5)
    assert _alive(MARK) == []


FORGE = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
stolen = 0
for pid in [p for p in os.listdir('/proc') if p.isdigit() and p != os.readlink('/proc/self')]:
    # (pidfd_open counts in our own PID namespace, where 1 is this run itself)
    pfd = libc.syscall(434, int(pid), 0) if pid != '1' else -1
    for fd in range(64):
        for target in ([libc.syscall(438, pfd, fd, 0)] if pfd >= 0 else []) + [-1]:
            try:
                target = target if target >= 0 else os.open(f'/proc/{pid}/fd/{fd}', os.O_WRONLY)
                os.write(target, b'{"status": "ok", "nonce": null, "size": 0}\\n')
                stolen += 1
            except OSError:
                pass
assert stolen == 0, stolen
"""


def test_a_run_cannot_write_to_the_servers_pipes(grade):
    score, record = grade("forger", FORGE)
    assert score == FULL and record.problems == []
    for student in ("after1", "after2"):  # the server answers the next requests, in step
        score, record = grade(student)
        assert score == FULL and record.problems == [] and record.suspicious == []


LEAVE = """
import os, ctypes
open('/tmp/left-behind', 'w').write('x')
libc = ctypes.CDLL(None, use_errno=True)
libc.shmget(0x4242, 4096, 0o1666)  # IPC_CREAT | 0666
"""
FIND = """
import os, ctypes
libc = ctypes.CDLL(None, use_errno=True)
if os.path.exists('/tmp/left-behind') or libc.shmget(0x4242, 4096, 0o666) >= 0:
    dlogprobs = None
"""


def test_runs_share_no_tmp_and_no_shared_memory(grade):
    assert grade("leaver", LEAVE)[0] == FULL
    assert grade("finder", FIND)[0] == FULL  # dlogprobs would be None had anything been left


def test_a_process_the_student_forks_sends_no_results(grade):
    # the child goes on through the notebook too; only the run's own process may answer
    score, record = grade(
        "forker", "import os\nif os.fork() == 0:\n    x = [0] * 10\nos._exit(0) if False else None"
    )
    assert score == FULL and record.problems == []
