"""The kit grades from any course folder and any install: from the repo (every other e2e test),
from a copied course folder graded with the original virtualenv, and after a non-editable
`pip install .` (into a virtualenv of its own, which holds the suite's packages as hard links).
In each, the sandbox shows the Python inside only the kit's untrusted side."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from grader.confine import bwrap_works
from grader.incoming.submissions import Sample, write_submissions

from conftest import ROOT, VENV_BIN, make_course

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


def _virtualenv_with_these_packages(venv: Path) -> Path:
    """A virtualenv of its own holding this one's packages as hard links, the kit's editable
    install left out, and its console scripts run by its own Python: what `pip install .`
    of the kit's dependencies leaves, without 45-90 s of unpacking torch again."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    where = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    there = Path(subprocess.run([str(python), "-c", where], capture_output=True, text=True).stdout.strip())
    here = Path(sysconfig.get_paths()["purelib"])
    for entry in here.iterdir():
        if "backprop_ninja" in entry.name:  # the kit, installed editable here
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.copytree(entry, there / entry.name, symlinks=True, copy_function=_link)
        else:
            _link(entry, there / entry.name)
    shebang = f"#!{sys.executable}\n"
    for script in VENV_BIN.iterdir():
        if script.is_file() and not script.name.startswith(("python", "activate")):
            text = script.read_bytes()
            if text.startswith(shebang.encode()):
                (venv / "bin" / script.name).write_bytes(f"#!{python}\n".encode() + text[len(shebang) :])
                (venv / "bin" / script.name).chmod(0o755)
    return python


def _link(src, dest) -> None:
    try:
        os.link(src, dest, follow_symlinks=False)
    except OSError:  # another file system, or a link: a copy
        shutil.copy2(src, dest, follow_symlinks=False)


def test_a_non_editable_install(tmp_path, names_txt):
    python = _virtualenv_with_these_packages(tmp_path / "venv")
    pip = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-compile"]
        + [str(_source_copy(tmp_path / "src"))],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert pip.returncode == 0, pip.stderr[-3000:]
    # every requirement the kit declares is met by what is installed
    check = subprocess.run([str(python), "-m", "pip", "check"], capture_output=True, text=True, timeout=300)
    assert check.returncode == 0, check.stdout[-3000:]
    located = subprocess.run(
        [str(python), "-c", "import grader; print(grader.__file__)"], capture_output=True, text=True, cwd="/"
    ).stdout
    assert "site-packages" in located
    # the package sits in a bound tree (the virtualenv): all but the untrusted side is covered
    assert _sees(python).split() == ["True", "False"]
    course = make_course(tmp_path / "course", names_txt)
    record = _grade_one(course, python)
    assert record["score"] == 38 and record["problems"] == [], record["problems"]
