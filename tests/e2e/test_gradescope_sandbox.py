"""Issue 17, point 4: the Gradescope autograder where bubblewrap cannot start (a bwrap on PATH
that exits 1, as Gradescope's container may refuse namespaces), run by the real
run_autograder on a notebook that earns nothing and attacks: it reads the instructor's
notebook shipped in the zip and plants SQLite triggers in the throw-away gradebook.

- built as by default: not graded, results.json says why to staff, plainly to the student,
  and the notebook's code never ran;
- built with --allow-unsandboxed: graded, with a warning for staff, and the attack reads no
  solution and changes no score (the kernel and the replay ran as other uids);
- with bubblewrap working: graded, and the attack reaches nothing either.

The roots are made where every user may pass through (as /autograder is), so what keeps the
attack out is the autograder's doing, not a test folder's mode.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import tempfile
import uuid
import zipfile
from pathlib import Path

import nbformat
import pytest

from grader.confine import bwrap_works
from grader.exercise import spec
from grader.gradescope import build, results, scripts
from grader.incoming.submissions import fill

from conftest import VENV_BIN

ALL = [g.grade_id for g in spec.GRADED]
USER = 6001
ATTACK = """import json, os, sqlite3
probe = {"uid": os.getuid()}
def attempt(name, how):
    try:
        probe[name] = how()
    except Exception as e:
        probe[name] = type(e).__name__
marker, nb = "### BEGIN " + "SOLUTION", "/source/backprop_ninja/backprop_ninja.ipynb"
attempt("zip_notebook", lambda: marker in open(ROOT + "/source/course" + nb).read())
attempt("work_notebook", lambda: marker in open(ROOT + "/grading" + nb).read())
attempt("gradebook_read", lambda: len(open(ROOT + "/grading/gradebook.db", "rb").read()))
def plant():
    db = sqlite3.connect(ROOT + "/grading/gradebook.db")
    db.execute("CREATE TRIGGER IF NOT EXISTS all_points AFTER INSERT ON grade BEGIN "
               "UPDATE grade SET auto_score = max_score WHERE id = NEW.id; END")
    db.commit()
    return "planted"
attempt("gradebook_write", plant)
attempt("metadata", lambda: len(open(ROOT + "/submission_metadata.json").read()) > 0)
found = []
for top, dirs, files in os.walk(ROOT):
    for name in files:
        try:
            if marker in open(os.path.join(top, name), errors="ignore").read():
                found.append(os.path.join(top, name))
        except OSError:
            pass
probe["solutions_found"] = found
attempt("ran", lambda: open(MARK, "w").write("ran"))
print("PROBE " + json.dumps(probe))
"""
NOT_READ = {"PermissionError", "FileNotFoundError"}


def _extract(zip_path: Path, dest: Path) -> None:
    """As Gradescope does: files with the modes the zip gives them."""
    with zipfile.ZipFile(zip_path) as zf:
        for info in zf.infolist():
            os.chmod(zf.extract(info, dest), (info.external_attr >> 16) & 0o777 or 0o644)


@pytest.fixture(scope="module")
def course(tmp_path_factory, new_course):
    return new_course(tmp_path_factory.mktemp("gs-sandbox-course"))


@pytest.fixture(scope="module")
def sources(tmp_path_factory, course):
    """Each zip (as built by default, and with --allow-unsandboxed) extracted and set up."""
    out = {}
    for allowed in (False, True):
        tmp = tmp_path_factory.mktemp(f"gs-build-{allowed}")
        zip_path = build.build(out=tmp / "autograder.zip", course=course, allow_unsandboxed=allowed)
        src = tmp / "source"
        _extract(zip_path, src)
        env = dict(
            os.environ, PATH=f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}", **{scripts.SKIP_INSTALL: "1"}
        )
        done = subprocess.run(
            [str(src / "setup.sh")], cwd=src, env=env, capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, done.stdout + done.stderr
        out[allowed] = src
    return out


@pytest.fixture(scope="module")
def failing_bwrap(tmp_path_factory):
    folder = tmp_path_factory.mktemp("failing-bwrap")
    (folder / "bwrap").write_text("#!/bin/sh\nexit 1\n")
    (folder / "bwrap").chmod(0o755)
    return folder


@pytest.fixture
def autograder(course):
    """run(source, path_first=None): one Gradescope run of the attack in a root of its own."""
    roots = []

    def run(source: Path, path_first: Path | None = None) -> dict:
        root = Path(tempfile.mkdtemp(prefix="bn-autograder-", dir="/tmp"))
        roots.append(root)
        root.chmod(0o755)
        shutil.copytree(source, root / "source", symlinks=True)
        shutil.copy(root / "source" / "run_autograder", root / "run_autograder")
        mark = f"/tmp/bn-attack-{uuid.uuid4().hex}"
        release = nbformat.read(course / "release" / spec.ASSIGNMENT / f"{spec.NOTEBOOK}.ipynb", 4)
        code = f"ROOT, MARK = {str(root)!r}, {mark!r}\n" + ATTACK
        (root / "submission").mkdir()
        nbformat.write(
            fill(release, {}, [("ex1_solution", code)]), root / "submission" / f"{spec.NOTEBOOK}.ipynb"
        )
        (root / "submission_metadata.json").write_text(json.dumps({"users": [{"id": USER}]}))
        path = os.pathsep.join(
            [*([str(path_first)] if path_first else []), str(VENV_BIN), os.environ["PATH"]]
        )
        env = dict(os.environ, PATH=path, AUTOGRADER_ROOT=str(root))
        env.pop("BACKPROP_NINJA_ALLOW_UNSANDBOXED", None)
        done = subprocess.run(
            [str(root / "run_autograder")], cwd=root, env=env, capture_output=True, text=True, timeout=1200
        )
        assert done.returncode == 0, done.stdout + done.stderr
        ran = Path(mark).exists()
        Path(mark).unlink(missing_ok=True)
        return {
            "results": json.loads((root / "results" / "results.json").read_text()),
            "stdout": done.stdout,
            "probe": _probe(root),
            "ran": ran,
            "triggers": _triggers(root / "grading" / "gradebook.db"),
        }

    yield run
    for root in roots:
        shutil.rmtree(root, ignore_errors=True)


def _probe(root: Path) -> dict | None:
    """What the attack printed in the kernel (the autograded notebook's outputs), if it ran."""
    nb = root / "grading" / "autograded" / str(USER) / spec.ASSIGNMENT / f"{spec.NOTEBOOK}.ipynb"
    if not nb.is_file():
        return None
    for cell in nbformat.read(nb, 4).cells:
        for out in cell.get("outputs", []):
            text = out.get("text", "")
            if "PROBE " in text:
                return json.loads(text.split("PROBE ", 1)[1].splitlines()[0])
    return None


def _triggers(db: Path) -> list[str]:
    if not db.is_file():
        return []
    with sqlite3.connect(db) as conn:
        return [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")]


def _assert_nothing_reached(probe: dict) -> None:
    for name in ("zip_notebook", "work_notebook", "gradebook_read", "gradebook_write"):
        assert probe[name] in NOT_READ | {"OperationalError"}, (name, probe)
    assert probe["solutions_found"] == []


def test_refused_without_the_sandbox(sources, failing_bwrap, autograder):
    got = autograder(sources[False], path_first=failing_bwrap)
    data = got["results"]
    reason = f"{failing_bwrap / 'bwrap'} does not work: `bwrap --version` exited 1 (no output)"
    assert data["score"] == 0.0 and data["output"] == results.STUDENT_REFUSAL
    student, staff = data["tests"]
    assert (student["visibility"], student["output"]) == ("visible", results.STUDENT_REFUSAL)
    assert staff["visibility"] == "hidden"
    assert staff["name"] == f"not graded: the sandbox could not start ({reason})"
    assert data["extra_data"]["sandbox"] == reason and "not available" not in json.dumps(data)
    assert f"NOT GRADED: the sandbox could not start ({reason})" in got["stdout"]
    assert got["probe"] is None and not got["ran"] and got["triggers"] == []  # no student code ran


@pytest.mark.skipif(os.geteuid() != 0, reason="grading without the sandbox needs root (as on Gradescope)")
def test_allowed_at_build_time_grades_and_the_attack_reaches_nothing(sources, failing_bwrap, autograder):
    got = autograder(sources[True], path_first=failing_bwrap)
    data, probe = got["results"], got["probe"]
    assert probe is not None and got["ran"], got["stdout"]  # the kernel ran it, unsandboxed
    assert probe["uid"] != 0 and probe["metadata"] is True  # another user; the root was open to it
    _assert_nothing_reached(probe)
    assert got["triggers"] == []
    assert [t["name"] for t in data["tests"]][: len(ALL)] == ALL
    assert data["score"] == 0.0 and all(t["score"] == 0 for t in data["tests"])
    warning = data["tests"][-1]
    assert warning["visibility"] == "hidden" and "WITHOUT the sandbox" in warning["output"]
    assert "bwrap --version` exited 1" in data["extra_data"]["sandbox"]
    assert "WARNING: grading WITHOUT the sandbox" in got["stdout"]


@pytest.mark.skipif(not bwrap_works(), reason="bubblewrap is needed (.ci/run installs it)")
def test_with_the_sandbox_the_attack_reaches_nothing(sources, autograder):
    got = autograder(sources[False])
    data, probe = got["results"], got["probe"]
    assert probe is not None, got["stdout"]
    _assert_nothing_reached(probe)
    assert probe["metadata"] == "FileNotFoundError" and not got["ran"]  # its /tmp was its own
    assert got["triggers"] == [] and data["score"] == 0.0
    assert [t["name"] for t in data["tests"]] == ALL and "sandbox" not in data["extra_data"]
