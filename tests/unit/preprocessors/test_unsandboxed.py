"""grader/preprocessors/unsandboxed.py: where bubblewrap cannot start (a bwrap on PATH that
exits 1), LimitedExecute and ReplayGrades refuse before any student code runs, unless staff
opted in; opted in and run by root, the kit's kernel runs as a uid of its own in a copy of
the submission, reads nothing closed to others, and leaves no process behind."""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

import pytest
from nbformat.v4 import new_code_cell, new_notebook
from traitlets.config import Config

from grader.confine import PACKAGE, bwrap, prepare_runtime_dir
from grader.confine.probe import ALLOW_ENV, SandboxUnavailable
from grader.preprocessors import LimitedExecute, ReplayGrades, unsandboxed

pytestmark = pytest.mark.integration  # starts processes: make integration

KERNEL = "backprop-ninja-sandbox"


@pytest.fixture
def failing_bwrap(tmp_path, monkeypatch):
    """Gradescope's container, as the issue simulated it: a bwrap that exits 1."""
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "bwrap").write_text("#!/bin/sh\nexit 1\n")
    (folder / "bwrap").chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("JUPYTER_PATH", str(PACKAGE / "confine" / "jupyter"))
    monkeypatch.setenv(ALLOW_ENV, "")  # restored afterwards: the rule sets it
    bwrap.sandbox_status.cache_clear()
    yield folder / "bwrap"
    bwrap.sandbox_status.cache_clear()


def _nb(*sources):
    return new_notebook(cells=[new_code_cell(s) for s in sources])


def _execute(config: Config | None = None, kernel: str = KERNEL) -> LimitedExecute:
    return LimitedExecute(config=config or Config(), kernel_name=kernel, timeout=120, startup_timeout=120)


def test_the_kernel_is_refused_with_the_real_reason(failing_bwrap, tmp_path):
    nb = _nb(f"open({str(tmp_path / 'ran')!r}, 'w')")
    with pytest.raises(SandboxUnavailable) as e:
        _execute().preprocess(nb, {"metadata": {"path": str(tmp_path)}})
    assert e.value.reason == f"{failing_bwrap} does not work: `bwrap --version` exited 1 (no output)"
    assert not (tmp_path / "ran").exists()


def test_a_kernel_that_is_not_the_sandboxs_is_refused_too(tmp_path, monkeypatch):
    monkeypatch.setenv(ALLOW_ENV, "")  # restored afterwards: the rule sets it
    with pytest.raises(SandboxUnavailable, match="'python3' is not the kit's sandboxed kernel"):
        _execute(kernel="python3").preprocess(_nb("1"), {"metadata": {"path": str(tmp_path)}})


def test_the_switch_from_config_and_from_the_environment(monkeypatch):
    monkeypatch.setenv(ALLOW_ENV, "")  # restored afterwards: the rule sets it
    assert not _execute().allow_unsandboxed
    c = Config()
    c.LimitedExecute.allow_unsandboxed = True
    assert _execute(c).allow_unsandboxed
    assert ReplayGrades(config=c)._allow_unsandboxed()
    monkeypatch.setenv(ALLOW_ENV, "1")
    assert _execute().allow_unsandboxed


def test_the_replay_is_refused_with_the_real_reason(failing_bwrap, tmp_path):
    c = Config()
    c.CourseDirectory.root = str(tmp_path)
    resources = {"nbgrader": {"student": "s1", "assignment": "backprop_ninja"}}
    with pytest.raises(SandboxUnavailable, match="does not work: `bwrap --version` exited 1"):
        ReplayGrades(config=c).preprocess(_nb("1"), resources)
    assert not (tmp_path / "reports").exists()


def test_the_batch_refuses_once_before_any_worker(failing_bwrap, tmp_path):
    refused, warned = unsandboxed.before_batch(tmp_path, allowed=False)
    assert refused.startswith("not graded: the sandbox could not start (") and warned is None
    refused, warned = unsandboxed.before_batch(tmp_path, allowed=True)
    assert refused is None and "WITHOUT a sandbox" in warned and str(failing_bwrap) in warned
    (tmp_path / "nbgrader_config.py").write_text(
        "c = get_config()\nc.LimitedExecute.allow_unsandboxed = True\n"
    )
    assert unsandboxed.before_batch(tmp_path, allowed=False)[0] is None


# ------------------------------------------------------------ opted in, as root
PROBE = """import json, os
seen = {"uid": os.getuid(), "cwd": os.getcwd(), "files": sorted(os.listdir("."))}
for name, path in (("secret", SECRET), ("runtime", RUNTIME)):
    try:
        seen[name] = open(path).read() if os.path.isfile(path) else os.listdir(path)
    except OSError as e:
        seen[name] = type(e).__name__
open("written-here", "w").write("x")
import subprocess
subprocess.Popen(["sleep", "4242.5"], start_new_session=True)
print("SEEN " + json.dumps(seen))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="runs the kernel as another uid: root only")
def test_allowed_the_kernel_runs_as_its_own_uid(failing_bwrap, tmp_path, monkeypatch, caplog):
    """One kernel start: a course folder others may pass through, with a file closed to them."""
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", prepare_runtime_dir())
    course = Path(os.environ["JUPYTER_RUNTIME_DIR"]).parent / f"bn-test-course-{os.getpid()}"
    (course / "submission").mkdir(parents=True)
    course.chmod(0o755)
    (course / "submission" / "names.txt").write_text("emma\n")
    secret = course / "gradebook.db"
    secret.write_text("the grades")
    secret.chmod(0o600)
    c = Config()
    c.KernelManager.transport = "ipc"
    c.KernelManager.ip = os.path.join(os.environ["JUPYTER_RUNTIME_DIR"], "kernel")
    c.LimitedExecute.allow_unsandboxed = True
    nb = _nb(f"SECRET, RUNTIME = {str(secret)!r}, {os.environ['JUPYTER_RUNTIME_DIR']!r}", PROBE)
    try:
        with caplog.at_level(logging.WARNING):
            out, _ = _execute(c).preprocess(nb, {"metadata": {"path": str(course / "submission")}})
        text = "".join(o.get("text", "") for o in out.cells[1].outputs)
        seen = json.loads(text.split("SEEN ", 1)[1])
        assert seen["uid"] != 0 and "/bn-unsandboxed-" in seen["cwd"]
        assert seen["files"] == ["names.txt"]
        assert seen["secret"] == "PermissionError" and seen["runtime"] == "PermissionError"
        assert not (course / "submission" / "written-here").exists()  # a copy, thrown away
        assert any("WITHOUT a sandbox" in r.getMessage() for r in caplog.records)
        assert _running_as(seen["uid"]) == []  # the setsid() sleep included
    finally:
        shutil.rmtree(course, ignore_errors=True)


def _running_as(uid: int) -> list[str]:
    """Processes of `uid` that are not zombies (killed, waiting for init to reap them)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and proc.stat().st_uid == uid:
                stat = (proc / "stat").read_text()
                if stat.rsplit(")", 1)[1].split()[0] != "Z":
                    found.append(stat)
        except OSError:
            continue
    return found
