"""The autograder zip: Gradescope's two scripts at the top (executable), the kit, the course's
source with names.txt, pinned requirements; nothing of a course's run-time state. For a written
exercise (--assignment): its name in gradescope.json, the files its setup reads beside its
notebook; an assignment the kit does not grade is refused."""

from __future__ import annotations

import dataclasses
import json
import shutil
import stat
import zipfile

import pytest
from unit.gradescope.written_course import add_written

from grader.exercise import spec
from grader.exercise.definitions.gpt_block import GPT_BLOCK
from grader.gradescope import build, requirements, scripts
from grader.gradescope.__main__ import main

from conftest import ROOT
from tiny_exercise import TINY

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
        settings = json.loads(zf.read("gradescope.json"))
        assert (settings["visibility"], settings["assignment"]) == ("hidden", spec.ASSIGNMENT)
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
    with pytest.raises(build.BuildError, match="make data"):
        build.find_data(course, spec.ASSIGNMENT, "names.txt")
    theirs = tmp_path / "names.txt"
    theirs.write_text("ava\n")
    monkeypatch.setenv("NAMES_TXT", str(theirs))
    assert build.find_data(course, spec.ASSIGNMENT, "names.txt") == theirs


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


PINS = [requirements.Pin("torch", "2.13.0", ">=3.10")]
# an nbgrader assignment of the course that is none of the kit's: no definition in its metadata
PLAIN_NOTEBOOK = {"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def _entries(course, assignment) -> dict[str, build.Entry]:
    the_plan = build.plan(course=course, assignment=assignment, pins=PINS)
    assert len(set(the_plan.names)) == len(the_plan.names), the_plan.names
    return {e.name: e for e in the_plan.entries}


def test_a_written_exercise_ships_its_notebook_and_the_names_txt_it_reads(course):
    add_written(course, GPT_BLOCK, {"names.txt": "liam\n"})
    entries = _entries(course, "gpt_block")
    assert json.loads(entries["gradescope.json"].content())["assignment"] == "gpt_block"
    assert "course/source/gpt_block/gpt_block.ipynb" in entries
    assert entries["course/source/gpt_block/names.txt"].content() == b"liam\n"
    assert list(entries)[-1] == "course/source/gpt_block/names.txt"
    assert NAMES not in entries  # another assignment's data stays out; its source goes in as before
    assert f"course/source/{spec.ASSIGNMENT}/{spec.NOTEBOOK}.ipynb" in entries


def test_a_written_exercises_names_txt_falls_back_to_NAMES_TXT(course, tmp_path, monkeypatch):
    add_written(course, GPT_BLOCK)
    monkeypatch.delenv("NAMES_TXT", raising=False)
    with pytest.raises(build.BuildError, match="no names.txt in .*gpt_block.*make data"):
        _entries(course, "gpt_block")
    theirs = tmp_path / "names.txt"
    theirs.write_text("ava\n")
    monkeypatch.setenv("NAMES_TXT", str(theirs))
    assert _entries(course, "gpt_block")["course/source/gpt_block/names.txt"].content() == b"ava\n"


def test_a_written_exercise_ships_each_file_its_setup_reads_once(course):
    add_written(course, dataclasses.replace(TINY, files=("weights.csv",)))
    with pytest.raises(build.BuildError, match="no weights.csv in .*tiny: tiny's setup reads it"):
        _entries(course, "tiny")
    (course / "source" / "tiny" / "weights.csv").write_text("1,2\n")
    entries = _entries(course, "tiny")  # in the source's tree and named by the definition: once
    assert entries["course/source/tiny/weights.csv"].content() == b"1,2\n"


def test_an_exercise_that_reads_no_file_ships_no_names_txt(course):
    add_written(course, TINY)
    entries = _entries(course, "tiny")
    assert "course/source/tiny/tiny.ipynb" in entries
    assert not [n for n in entries if n.endswith("names.txt")]


def test_an_assignment_the_kit_does_not_grade_is_refused(course, tmp_path, capsys):
    (course / "source" / "hw9").mkdir()
    (course / "source" / "hw9" / "hw9.ipynb").write_text(json.dumps(PLAIN_NOTEBOOK))
    with pytest.raises(build.BuildError, match="hw9 is not an exercise the kit grades"):
        build.plan(course=course, assignment="hw9", pins=PINS)
    out = tmp_path / "hw9.zip"
    assert main(["build", str(out), "--course", str(course), "--assignment", "hw9"]) == 2
    assert "error: hw9 is not an exercise the kit grades" in capsys.readouterr().err
    assert not out.exists()
