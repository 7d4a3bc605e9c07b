"""The kit grades from any course folder and any install: from the repo (every other e2e test),
from a copied course folder graded with the original virtualenv, and after a non-editable
`pip install .`. In each, the sandbox shows the Python inside only the kit's untrusted side."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.confine import bwrap_works
from grader.incoming.submissions import Sample, write_submissions

from conftest import ROOT, make_course

pytestmark = pytest.mark.skipif(not bwrap_works(), reason="bubblewrap is needed: the failure was inside it")

PROBE = """
import importlib.util
def found(name):
    try:
        return importlib.util.find_spec(name) is not None
    except ImportError:  # its parent package is not there at all
        return False
print(found("grader.untrusted.server"), found("grader.reference.steps"))
"""


def _grade_one(course: Path, python: Path) -> dict:
    env = dict(os.environ, PATH=f"{python.parent}{os.pathsep}{os.environ['PATH']}")
    run = lambda *a: subprocess.run(a, cwd=course, env=env, capture_output=True, text=True, timeout=900)  # noqa: E731
    made = run(str(python.parent / "nbgrader"), "generate_assignment", "backprop_ninja", "--force")
    assert made.returncode == 0, made.stderr[-2000:]
    write_submissions([Sample("alice", "reference")], course=course)
    done = run(str(python.parent / "backprop-ninja"), "grade", str(course), "--quiet", "--workers", "1")
    assert done.returncode == 0, (
        done.stdout[-3000:] + (course / "reports" / "autograde.log").read_text()[-3000:]
    )
    return json.loads((course / "reports" / "replay" / "alice.json").read_text())


def _sees(python: Path) -> str:
    """What a Python in the sandbox finds of the kit, asked from a grading process of `python`."""
    code = (
        "import subprocess, sys; from grader.confine import Sandbox; "
        f"cmd = Sandbox().command([sys.executable, '-I', '-c', {PROBE!r}], writable={{}}, cwd='/tmp'); "
        "print(subprocess.run(cmd, capture_output=True, text=True).stdout)"
    )
    return subprocess.run(
        [str(python), "-c", code], capture_output=True, text=True, cwd="/", timeout=120
    ).stdout


def test_the_repo_with_its_editable_install():
    assert _sees(Path(sys.executable)).split() == ["True", "False"]


def test_a_copied_course_folder_with_the_original_virtualenv(tmp_path, names_txt):
    course = make_course(tmp_path / "copy", names_txt)
    shutil.copytree(ROOT / "grader", course / "grader", ignore=shutil.ignore_patterns("__pycache__"))
    record = _grade_one(course, Path(sys.executable))
    assert record["score"] == 38 and record["problems"] == [], record["problems"]


def _source_copy(dest: Path) -> Path:
    """What `pip install .` needs, copied: pip builds in the source folder, not in the repo's."""
    shutil.copytree(ROOT / "grader", dest / "grader", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, dest / name)
    return dest


def test_a_non_editable_install(tmp_path, names_txt):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    pip = subprocess.run(
        # --no-compile: byte-compiling torch and the rest took half of the 90 s install
        [str(python), "-m", "pip", "install", "-q", "--no-compile", str(_source_copy(tmp_path / "src"))],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert pip.returncode == 0, pip.stderr[-3000:]
    located = subprocess.run(
        [str(python), "-c", "import grader; print(grader.__file__)"], capture_output=True, text=True, cwd="/"
    ).stdout
    assert "site-packages" in located
    # the package sits in a bound tree (the virtualenv): all but the untrusted side is covered
    assert _sees(python).split() == ["True", "False"]
    course = make_course(tmp_path / "course", names_txt)
    record = _grade_one(course, python)
    assert record["score"] == 38 and record["problems"] == [], record["problems"]
