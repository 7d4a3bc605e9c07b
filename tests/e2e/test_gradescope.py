"""The Gradescope autograder end to end, without Gradescope: the built zip extracted into a
temp AUTOGRADER_ROOT laid out as Gradescope does, setup.sh (installation skipped: the
virtualenv has the requirements), then run_autograder on corpus notebooks. Its results.json
must give the scores nbgrader gives the same notebook for the same student. And a written
exercise's zip (`gradescope build --assignment gpt_block` for the GPT block that `backprop-ninja
new` put in a course): the instructor's answers get every point, a wrong one loses its own.

And a real install (issue 20), for each Python of Gradescope's images and the build's, where
this machine has that Python and torch's CPU build for it (PyTorch's CPU index, or a wheel on
disk that pip's configuration finds): setup.sh for real but for apt-get (its own virtualenv,
torch, the requirements from PyPI, the kit), then run_autograder with that virtualenv alone."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import stat
import subprocess
import time
import zipfile
from pathlib import Path

import nbformat
import pytest
from unit.gradescope.gradescope_pythons import find_python

from grader.confine.probe import unsandboxed_allowed
from grader.exercise import spec
from grader.gradescope import build, requirements, scripts
from grader.incoming.submissions import write_submissions
from grader.reports.scores import read_scores

from conftest import VENV_BIN, nbgrader
from corpus import CORPUS
from gpt_corpus import CASES as GPT_CASES
from gpt_corpus import WRITTEN, expected_scores

ALL = [g.grade_id for g in spec.GRADED]
# corpus case -> Gradescope user id (the seed comes from it, as from an nbgrader student id)
CASES = {"s01_reference": 5001, "s04_bessel": 5002}


def _env(root):
    return dict(os.environ, PATH=f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}", AUTOGRADER_ROOT=str(root))


def _extract(zip_path, dest):
    """As Gradescope does: files with the modes the zip gives them."""
    with zipfile.ZipFile(zip_path) as zf:
        for info in zf.infolist():
            path = zf.extract(info, dest)
            os.chmod(path, (info.external_attr >> 16) & 0o777 or 0o644)


@pytest.fixture(scope="module")
def course(tmp_path_factory, new_course):
    """A course graded by nbgrader itself: the reference scores, under the Gradescope ids."""
    c = new_course(tmp_path_factory.mktemp("gs-course"))
    samples = [
        dataclasses.replace(k.sample, student=str(CASES[k.sample.student]))
        for k in CORPUS
        if k.sample.student in CASES
    ]
    write_submissions(samples, course=c)
    nbgrader(c, "autograde", spec.ASSIGNMENT, "--force")
    return c


@pytest.fixture(scope="module")
def source(tmp_path_factory, course):
    """The zip built from the course, extracted and set up once; built to grade without the
    sandbox only if this test run opted in (BACKPROP_NINJA_ALLOW_UNSANDBOXED=1, no bubblewrap)."""
    tmp = tmp_path_factory.mktemp("gs-build")
    zip_path = build.build(
        out=tmp / "dist" / "gradescope_autograder.zip", course=course, allow_unsandboxed=unsandboxed_allowed()
    )
    return _setup(zip_path, tmp / "autograder")


def _setup(zip_path, root):
    """The zip extracted under `root` as Gradescope does, and its setup.sh run (no install)."""
    src = root / "source"
    _extract(zip_path, src)
    env = dict(_env(root), **{scripts.SKIP_INSTALL: "1"})
    proc = subprocess.run(
        [str(src / "setup.sh")], cwd=src, env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return src


def _autograde(source, tmp_path, *, notebook=None, name="backprop_ninja.ipynb", user=None):
    """One Gradescope run in a root of its own; returns results.json and the seconds it took."""
    root = tmp_path / "autograder"
    shutil.copytree(source, root / "source")
    shutil.copy(root / "source" / "run_autograder", root / "run_autograder")  # Gradescope copies it there
    (root / "submission").mkdir()
    if notebook is not None:
        shutil.copy(notebook, root / "submission" / name)
    users = [] if user is None else [{"email": "s@example.edu", "id": user, "name": "S"}]
    (root / "submission_metadata.json").write_text(json.dumps({"id": 1, "users": users}))
    started = time.monotonic()
    proc = subprocess.run(
        [str(root / "run_autograder")], cwd=root, env=_env(root), capture_output=True, text=True, timeout=1200
    )
    seconds = time.monotonic() - started
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads((root / "results" / "results.json").read_text()), proc.stdout, seconds


def test_setup_prepared_the_release_and_its_own_gradebook(source):
    assert (source / "course" / "release" / spec.ASSIGNMENT / f"{spec.NOTEBOOK}.ipynb").is_file()
    assert (source / "course" / "gradebook.db").is_file()
    assert stat.S_IMODE((source / "run_autograder").stat().st_mode) & 0o111


@pytest.mark.parametrize("case", sorted(CASES))
def test_scores_are_nbgraders(course, source, tmp_path, case):
    user = CASES[case]
    submitted = course / "submitted" / str(user) / spec.ASSIGNMENT / f"{spec.NOTEBOOK}.ipynb"
    got, stdout, seconds = _autograde(source, tmp_path, notebook=submitted, name="my work.ipynb", user=user)
    print(f"{case}: run_autograder took {seconds:.1f} s")
    nbgraders = {s.student: s.by_grade_id for s in read_scores(f"sqlite:///{course / 'gradebook.db'}")}[
        str(user)
    ]
    tests = {t["name"]: t for t in got["tests"]}
    assert [t["name"] for t in got["tests"]] == ALL
    assert {gid: t["score"] for gid, t in tests.items()} == nbgraders
    zeros = next(k.zeros for k in CORPUS if k.sample.student == case)
    assert {gid for gid, t in tests.items() if t["score"] == 0} == zeros
    assert got["score"] == sum(nbgraders.values())
    assert "graded as backprop_ninja.ipynb" in got["output"]
    # the same student's inputs and the judge's words, as nbgrader's record has them
    record = json.loads((course / "reports" / "replay" / f"{user}.json").read_text())
    assert got["extra_data"]["seed"] == record["seed"]
    for gid in zeros:
        assert record["verdicts"][gid]["hint"] in tests[gid]["output"]
        assert tests[gid]["output"].startswith(f"FAIL {gid}: 0/")
    assert f"seed {record['seed']}" in stdout


def test_no_notebook_is_zero_with_a_reason(source, tmp_path):
    got, _, seconds = _autograde(source, tmp_path, user=5003)
    assert got["score"] == 0.0 and got["tests"] == []
    assert "no notebook" in got["output"]
    assert seconds < 60


# the GPT block's corpus case -> Gradescope user id: right, and one gradient wrong (its consumers
# keep their points: carried credit)
GPT_USERS = {"g01_right": 5101, "g05_attention_key_untransposed": 5102}


def _kit(*args: str, **env: str) -> subprocess.CompletedProcess:
    """`backprop-ninja ARGS...` as the instructor runs it."""
    env = dict(os.environ, PATH=f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}", **env)
    done = subprocess.run(
        [str(VENV_BIN / "backprop-ninja"), *args], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


@pytest.fixture(scope="module")
def gpt_source(tmp_path_factory, names_txt):
    """The GPT block written into a course of its own by `new`, its zip built by the command
    line for that assignment, extracted and set up."""
    tmp = tmp_path_factory.mktemp("gs-gpt")
    _kit("new", "gpt_block", str(tmp / "course"), NAMES_TXT=str(names_txt))
    unsandboxed = ["--allow-unsandboxed"] if unsandboxed_allowed() else []
    zip_path = tmp / "gpt.zip"
    _kit(
        "gradescope",
        "build",
        str(zip_path),
        "--course",
        str(tmp / "course"),
        "--assignment",
        "gpt_block",
        *unsandboxed,
    )
    with zipfile.ZipFile(zip_path) as zf:
        assert json.loads(zf.read("gradescope.json"))["assignment"] == "gpt_block"
        assert zf.read("course/source/gpt_block/names.txt") == names_txt.read_bytes()  # its setup reads it
    return _setup(zip_path, tmp / "autograder")


@pytest.mark.parametrize("student", sorted(GPT_USERS))
def test_a_written_exercises_zip_grades_it(gpt_source, tmp_path, student):
    case = next(c for c in GPT_CASES if c.student == student)
    nb = nbformat.read(gpt_source / "course" / "release" / "gpt_block" / "gpt_block.ipynb", 4)
    answers = case.answers()
    for cell in nb.cells:
        cell.source = answers.get(cell.metadata["nbgrader"]["grade_id"], cell.source)
    nbformat.write(nb, tmp_path / "submitted.ipynb")
    got, stdout, seconds = _autograde(
        gpt_source,
        tmp_path,
        notebook=tmp_path / "submitted.ipynb",
        name="my gpt.ipynb",
        user=GPT_USERS[student],
    )
    print(f"{student}: run_autograder took {seconds:.1f} s")
    expected = expected_scores(case)
    assert [t["name"] for t in got["tests"]] == [g.grade_id for g in WRITTEN.graded]
    assert {t["name"]: t["score"] for t in got["tests"]} == expected
    assert {t["name"]: t["max_score"] for t in got["tests"]} == {g.grade_id: g.points for g in WRITTEN.graded}
    lost = {t["name"]: t["max_score"] - t["score"] for t in got["tests"] if t["score"] < t["max_score"]}
    assert lost == {gid: 1.0 for gid in case.zeros}  # ex1_dk alone: dln1 and dWk keep theirs
    total = sum(expected.values())
    assert got["score"] == total == 81 - len(case.zeros)
    summary = got["output"].splitlines()
    assert summary[:5] == [
        f"A GPT block, backpropagated by hand: {total:g}/81 points",
        f"exercise 1: {total - 22:g}/59",
        "exercise 2: 2/2",
        "exercise 3: 2/2",
        "exercise 4: 18/18",  # its training exercise
    ]
    assert "graded as gpt_block.ipynb" in got["output"]
    for gid in case.zeros:
        assert next(t for t in got["tests"] if t["name"] == gid)["output"].startswith(f"FAIL {gid}: 0/1")
    assert got["extra_data"]["problems"] == [] and f"seed {got['extra_data']['seed']}" in stdout


def _cpu_torch_for(minor: str, torch_txt: str) -> bool:
    """Whether pip, configured as here, finds torch's CPU build for Python `minor`."""
    version = [l for l in torch_txt.splitlines() if l.startswith("torch==")][0].split("==")[1]
    done = subprocess.run(
        [str(VENV_BIN / "python"), "-m", "pip", "index", "versions", "torch", "--only-binary=:all:"]
        + ["--index-url", requirements.CPU_INDEX, "--python-version", minor, "--retries", "1"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    return f"{version}+cpu" in done.stdout


@pytest.mark.parametrize("minor", ["3.10", "3.11", "3.12"])
def test_a_real_install_grades_as_nbgrader(course, tmp_path, minor):
    python = find_python(minor)
    if python is None:
        pytest.skip(f"no Python {minor} here (PATH, pyenv)")
    torch_txt = requirements.torch_txt(requirements.installed_pins())  # the zip's, as the test checks
    if not _cpu_torch_for(minor, torch_txt):
        pytest.skip(f"torch's CPU build for Python {minor} cannot be had here (its index is unreachable)")
    zip_path = build.build(out=tmp_path / "gs.zip", course=course, allow_unsandboxed=unsandboxed_allowed())
    with zipfile.ZipFile(zip_path) as zf:
        assert zf.read("requirements-torch.txt").decode() == torch_txt
    root = tmp_path / "autograder"
    _extract(zip_path, root / "source")
    first = Path(python).parent  # setup.sh's `python3` is this Python, as on the image
    if not (first / "python3").is_file():
        pytest.skip(f"{first} has no python3 for setup.sh to find")
    env = {k: v for k, v in os.environ.items() if k not in (scripts.SKIP_INSTALL, "VIRTUAL_ENV")}
    env.update(PATH=f"{first}{os.pathsep}{os.environ['PATH']}", **{scripts.SKIP_APT: "1"})
    done = subprocess.run(
        [str(root / "source" / "setup.sh")], env=env, capture_output=True, text=True, timeout=1800
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    venv_python = root / scripts.VENV / "bin" / "python3"
    probe = (
        "import sys, torch, grader; print('%d.%d' % sys.version_info[:2], torch.__version__, grader.__file__)"
    )
    seen = subprocess.run(
        [str(venv_python), "-I", "-c", probe], capture_output=True, text=True
    ).stdout.split()
    assert seen[:2] == [minor, "2.13.0+cpu"] and seen[2].startswith(str(root / scripts.VENV)), seen
    # run_autograder with nothing of this virtualenv's on PATH: setup.sh's alone grades
    user = CASES["s04_bessel"]
    (root / "submission").mkdir()
    shutil.copy(
        course / "submitted" / str(user) / spec.ASSIGNMENT / f"{spec.NOTEBOOK}.ipynb", root / "submission"
    )
    (root / "submission_metadata.json").write_text(json.dumps({"users": [{"id": user}]}))
    shutil.copy(root / "source" / "run_autograder", root / "run_autograder")
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if Path(p) != VENV_BIN)
    done = subprocess.run(
        [str(root / "run_autograder")],
        env=dict(env, PATH=path, AUTOGRADER_ROOT=str(root)),
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    got = json.loads((root / "results" / "results.json").read_text())
    nbgraders = {s.student: s.by_grade_id for s in read_scores(f"sqlite:///{course / 'gradebook.db'}")}
    assert {t["name"]: t["score"] for t in got["tests"]} == nbgraders[str(user)]
