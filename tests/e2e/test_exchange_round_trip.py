"""The nbgrader exchange inside the course folder (grader/incoming/exchange.py), with real nbgrader
on one machine: the instructor releases, two simulated students fetch and submit from homes of
their own, the instructor collects, and a collected submission is autograded.

nbgrader takes a student's id from the OS account (pwd.getpwuid(os.getuid()), not $USER), so
one account plays both students: each has a HOME, Jupyter config and data folder of its own,
and submits with `--student`, as nbgrader allows for alternative ids. The course's collect
(SafeCollect) refuses a folder not owned by the student it names, so this collect turns that
check off (`--ExchangeCollect.check_owner=False`), out loud; tests/e2e/test_exchange_users.py
has the students as real accounts, with the check on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

from grader.exercise import spec
from grader.incoming import exchange
from grader.incoming.submissions import fill, reference_answers

from conftest import ROOT, VENV_BIN, nbgrader

NB = f"{spec.ASSIGNMENT}/{spec.NOTEBOOK}.ipynb"
STUDENTS = ("alice", "bob")


def student(home: Path, *args: str) -> subprocess.CompletedProcess:
    """nbgrader as a student whose home is HOME, run in HOME/work."""
    env = dict(
        os.environ,
        HOME=str(home),
        JUPYTER_CONFIG_DIR=str(home / ".jupyter"),
        JUPYTER_DATA_DIR=str(home / ".local" / "share" / "jupyter"),
        PATH=f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    )
    proc = subprocess.run(
        [str(VENV_BIN / "nbgrader"), *args],
        cwd=home / "work",
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, f"nbgrader {' '.join(args)} as {home.name}:\n{proc.stdout}\n{proc.stderr}"
    return proc


def new_home(base: Path, name: str, course: Path) -> Path:
    home = base / name
    (home / ".jupyter").mkdir(parents=True)
    (home / "work").mkdir()
    (home / ".jupyter" / "nbgrader_config.py").write_text(exchange.student_config(course_root=course))
    return home


def loaded_config(folder: Path) -> dict:
    """Exchange.root and course_id as nbgrader would read FOLDER/nbgrader_config.py."""
    code = (
        "import json, sys\n"
        "from traitlets.config.loader import PyFileConfigLoader\n"
        "c = PyFileConfigLoader('nbgrader_config.py', path=sys.argv[1]).load_config()\n"
        "seen = {'root': c.Exchange.get('root'), 'course_id': c.CourseDirectory.get('course_id'),\n"
        "        'collect': c.ExchangeFactory.get('collect')}\n"
        "print(json.dumps(seen))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(folder)], cwd=folder, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def round_trip(tmp_path_factory, new_course):
    base = tmp_path_factory.mktemp("exchange")
    course = new_course(base / "course")  # the repo's nbgrader_config.py, exchange and all; generated
    nbgrader(course, "release_assignment", spec.ASSIGNMENT)
    homes = {name: new_home(base, name, course) for name in STUDENTS}
    for home in homes.values():
        student(home, "fetch_assignment", spec.ASSIGNMENT)
    fetched = homes["alice"] / "work" / NB
    answered = fill(nbformat.read(fetched, 4), reference_answers(nbformat.read(course / "source" / NB, 4)))
    nbformat.write(answered, fetched)  # bob submits the assignment as fetched
    for name, home in homes.items():
        student(home, "submit", spec.ASSIGNMENT, f"--student={name}")
    collected = nbgrader(course, "collect", spec.ASSIGNMENT, "--ExchangeCollect.check_owner=False")
    return course, homes, collected


def test_course_config_lines_set_the_exchange(round_trip):
    course, _, _ = round_trip
    assert loaded_config(course) == {
        "root": str(course / "exchange"),
        "course_id": "backprop_ninja",
        "collect": exchange.SAFE_COLLECT,
    }
    root = course / "exchange"
    assert oct(root.stat().st_mode & 0o7777) == oct(exchange.ROOT_MODE)
    assert oct((root / "backprop_ninja" / "inbound").stat().st_mode & 0o7777) == oct(exchange.INBOUND_MODE)
    assert (root / "backprop_ninja" / "outbound" / NB).is_file()


def test_repo_config_calls_configure_exchange():
    seen = loaded_config(ROOT)
    want = {"root": str(ROOT / "exchange"), "course_id": "backprop_ninja", "collect": exchange.SAFE_COLLECT}
    assert seen == want, f"nbgrader_config.py does not call configure_exchange: {seen}"


def test_each_student_fetched_the_release(round_trip):
    course, homes, _ = round_trip
    release = nbformat.read(course / "release" / NB, 4)
    assert nbformat.read(homes["bob"] / "work" / NB, 4).cells == release.cells
    for home in homes.values():
        assert (home / "work" / spec.ASSIGNMENT / "names.txt").is_file()
        assert (home / ".local" / "share" / "jupyter" / "nbgrader_cache" / "backprop_ninja").is_dir()


def test_collect_fills_submitted_for_both_students(round_trip):
    course, homes, collected = round_trip
    for name in STUDENTS:
        folder = course / "submitted" / name / spec.ASSIGNMENT
        assert (folder / "timestamp.txt").is_file()
        assert (folder / f"{spec.NOTEBOOK}.ipynb").read_bytes() == (homes[name] / "work" / NB).read_bytes()
    assert "Collecting submission: alice backprop_ninja" in collected.stdout + collected.stderr
    assert exchange.NO_OWNER_CHECK in collected.stdout + collected.stderr
    assert "### BEGIN SOLUTION" not in (course / "submitted" / "alice" / NB).read_text()
    alice = nbformat.read(course / "submitted" / "alice" / NB, 4)
    assert alice.cells != nbformat.read(course / "submitted" / "bob" / NB, 4).cells


def test_a_collected_submission_autogrades(round_trip):
    course, _, _ = round_trip
    nbgrader(course, "autograde", spec.ASSIGNMENT, "--student=alice")
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        assert gb.find_submission(spec.ASSIGNMENT, "alice").score == spec.total_points()
