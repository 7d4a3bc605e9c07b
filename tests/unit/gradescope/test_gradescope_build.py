"""The autograder zip: Gradescope's two scripts at the top (executable), the kit, the course's
source with names.txt, pinned requirements; nothing of a course's run-time state."""

from __future__ import annotations

import json
import shutil
import stat
import zipfile

import pytest

from grader.exercise import spec
from grader.gradescope import build, requirements, scripts

from conftest import ROOT

NAMES = f"course/source/{spec.ASSIGNMENT}/names.txt"


@pytest.fixture
def course(tmp_path):
    """A course folder with the run-time state a zip must leave out."""
    c = tmp_path / "course"
    c.mkdir()
    shutil.copy(ROOT / "nbgrader_config.py", c / "nbgrader_config.py")
    shutil.copytree(ROOT / "source", c / "source", ignore=shutil.ignore_patterns("names.txt"))
    (c / "source" / spec.ASSIGNMENT / "names.txt").write_text("emma\nolivia\n")
    (c / "source" / spec.ASSIGNMENT / ".ipynb_checkpoints").mkdir()
    (c / "source" / spec.ASSIGNMENT / ".ipynb_checkpoints" / "x.ipynb").write_text("{}")
    for folder in ("submitted/bob/backprop_ninja", "autograded/bob/backprop_ninja", ".venv/bin"):
        (c / folder).mkdir(parents=True)
        (c / folder / "f").write_text("x")
    (c / "gradebook.db").write_text("the instructor's")
    return c


@pytest.fixture
def built(course, tmp_path):
    return build.build(out=tmp_path / "dist" / "autograder.zip", course=course, visibility="hidden")


def test_scripts_at_the_top_and_executable(built):
    with zipfile.ZipFile(built) as zf:
        modes = {i.filename: i.external_attr >> 16 for i in zf.infolist()}
        assert zf.read("setup.sh").decode() == scripts.SETUP_SH
        assert zf.read("run_autograder").decode() == scripts.RUN_AUTOGRADER
    for name in ("setup.sh", "run_autograder"):
        assert stat.S_ISREG(modes[name]) and modes[name] & 0o111 == 0o111, oct(modes[name])
    assert modes["requirements.txt"] & 0o111 == 0


def test_kit_course_and_data_are_in(built, course):
    with zipfile.ZipFile(built) as zf:
        names = set(zf.namelist())
        assert zf.read(NAMES) == b"emma\nolivia\n"
        assert json.loads(zf.read("gradescope.json"))["visibility"] == "hidden"
    for needed in (
        "kit/pyproject.toml",
        "kit/grader/gradescope/run.py",
        "kit/grader/verdicts/judge.py",
        "kit/grader/confine/jupyter/kernels/backprop-ninja-sandbox/kernel.json",
        "course/nbgrader_config.py",
        f"course/source/{spec.ASSIGNMENT}/{spec.NOTEBOOK}.ipynb",
    ):
        assert needed in names, needed


def test_no_run_time_state_leaks(built):
    with zipfile.ZipFile(built) as zf:
        names = zf.namelist()
    for name in names:
        parts = name.split("/")
        assert not {".venv", "submitted", "autograded", "__pycache__", ".ipynb_checkpoints"} & set(parts), (
            name
        )
        assert not name.endswith((".pyc", "gradebook.db")), name
    assert names.count(NAMES) == 1


def test_requirements_pin_this_virtualenv(built):
    with zipfile.ZipFile(built) as zf:
        lines = zf.read("requirements.txt").decode().splitlines()
        torch_lines = zf.read("requirements-torch.txt").decode().splitlines()
    pins = [l for l in lines if l and not l.startswith(("#", "--"))]
    assert "torch==2.13.0" in pins
    assert "names==0.3.0" in pins
    assert 'nbgrader==0.9.6; python_version >= "3.11"' in pins  # 0.9.6 needs 3.11: bounded below it
    assert 'nbgrader<=0.9.6; python_version < "3.11"' in pins
    assert all(("==" in p or "<=" in p) and "+" not in p for p in pins), pins
    assert any(p.startswith("fqdn==") for p in pins)  # an extra a dependency asks for is pinned too
    assert not any(p.startswith(("pytest==", "ruff==", "playwright==")) for p in pins)  # test extras stay out
    assert not any(l.startswith("--") for l in lines)  # PyPI's alone: the CPU index serves torch only
    assert torch_lines[-2:] == [f"--index-url {requirements.CPU_INDEX}", "torch==2.13.0"]


def test_names_txt_falls_back_to_NAMES_TXT(course, tmp_path, monkeypatch):
    (course / "source" / spec.ASSIGNMENT / "names.txt").unlink()
    monkeypatch.delenv("NAMES_TXT", raising=False)
    with pytest.raises(FileNotFoundError, match="make data"):
        build.find_names_txt(course)
    theirs = tmp_path / "names.txt"
    theirs.write_text("ava\n")
    monkeypatch.setenv("NAMES_TXT", str(theirs))
    assert build.find_names_txt(course) == theirs


def test_the_same_inputs_build_the_same_bytes(course, tmp_path):
    pins = [requirements.Pin("torch", "2.13.0", ">=3.10")]
    a = build.write_zip(build.plan(course=course, pins=pins), tmp_path / "a.zip")
    b = build.write_zip(build.plan(course=course, pins=pins), tmp_path / "b.zip")
    assert a.read_bytes() == b.read_bytes()


def test_gradescope_json_says_what_each_python_takes(built):
    with zipfile.ZipFile(built) as zf:
        settings = json.loads(zf.read("gradescope.json"))
    assert settings["pythons"] == ["3.10", "3.11", "3.12", "3.13"]
    assert {"nbgrader", "numpy", "contourpy"} <= set(settings["not_exact"]["3.10"])
    assert "torch" not in settings["not_exact"]["3.10"] and settings["not_exact"]["3.12"] == []
