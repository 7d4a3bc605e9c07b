"""grader/preprocessors/replay_grades.py in-process: its traits are grader/settings.py's
JudgeSettings, disabled it changes nothing, its outputs are what nbgrader reads as the
score; and one real replay of the reference solution (a plain child process, no sandbox)."""

from __future__ import annotations

import copy
import json
import logging
import shutil
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook
from nbgrader.utils import determine_grade, is_grade
from traitlets.config import Config

from grader import settings
from grader.exercise import spec
from grader.exercise.verdict import Verdict
from grader.incoming.submissions import fill, reference_answers
from grader.preprocessors.replay_grades import ReplayGrades, verdict_outputs

from conftest import find_names_txt

pytestmark = pytest.mark.integration  # starts processes: make integration

ROOT = Path(__file__).resolve().parents[3]
SOURCE_NB = ROOT / "source" / "backprop_ninja" / "backprop_ninja.ipynb"
RELEASE_NB = ROOT / "release" / "backprop_ninja" / "backprop_ninja.ipynb"
FIELDS = settings.trait_settings()
LOG = logging.getLogger("test_unit_replay_grades")


def _ids(fields):
    return [f.name for f in fields]


# ------------------------------------------------------------ (a) traits mirror JudgeSettings
def test_there_are_judge_settings_to_mirror():
    assert {"batch_size", "run_timeout", "train_steps"} <= {f.name for f in FIELDS}


@pytest.mark.parametrize("field", FIELDS, ids=_ids(FIELDS))
def test_trait_has_the_settings_default(field):
    assert ReplayGrades.class_traits()[field.name].default_value == field.default


@pytest.mark.parametrize("field", FIELDS, ids=_ids(FIELDS))
def test_trait_has_the_settings_help(field):
    assert ReplayGrades.class_traits()[field.name].help == field.metadata["help"]


@pytest.mark.parametrize("field", FIELDS, ids=_ids(FIELDS))
def test_trait_value_has_the_settings_type(field):
    assert type(getattr(ReplayGrades(), field.name)) is type(field.default)


@pytest.mark.parametrize("field", FIELDS, ids=_ids(FIELDS))
def test_trait_is_configurable(field):
    assert ReplayGrades.class_traits(config=True).get(field.name) is not None


def _other_value(default):
    if isinstance(default, str):  # a choice: the other one
        return next(p for p in settings.AUTOGRAD_POLICIES if p != default)
    return type(default)(default * 2 + 1)


@pytest.mark.parametrize("field", FIELDS, ids=_ids(FIELDS))
def test_config_value_arrives_in_judge_settings(field):
    c = Config()
    setattr(c.ReplayGrades, field.name, _other_value(field.default))
    judged = ReplayGrades(config=c).judge_settings("u1")
    assert getattr(judged, field.name) == _other_value(field.default)


def test_autograd_policy_is_a_choice():
    from traitlets import TraitError

    with pytest.raises(TraitError):
        ReplayGrades(config=Config({"ReplayGrades": {"autograd_policy": "allow"}}))
    with pytest.raises(ValueError):
        settings.JudgeSettings(seed=1, autograd_policy="allow")


def test_judge_settings_is_a_judge_settings():
    assert type(ReplayGrades().judge_settings("u1")) is settings.JudgeSettings


def test_judge_settings_seed_comes_from_student_and_salt():
    c = Config()
    c.ReplayGrades.seed_salt = "term-2"
    assert ReplayGrades(config=c).judge_settings("u1").seed == settings.seed_for("u1", "term-2")


# ------------------------------------------------------------ (b) disabled
def _graded_cell(points=2.0, grade_id="ex2_dlogits"):
    cell = new_code_cell("grade('ex2_dlogits')")
    cell.metadata["nbgrader"] = {
        "grade": True,
        "solution": False,
        "locked": True,
        "grade_id": grade_id,
        "points": points,
        "schema_version": 3,
    }
    return cell


def test_disabled_returns_the_notebook_unchanged():
    nb = new_notebook(cells=[_graded_cell()])
    nb.cells[0].outputs = [nbformat.v4.new_output("stream", name="stdout", text="from the kernel\n")]
    before = copy.deepcopy(nb)
    c = Config()
    c.ReplayGrades.enabled = False
    out, _ = ReplayGrades(config=c).preprocess(
        nb, {"nbgrader": {"student": "u1", "assignment": spec.ASSIGNMENT}}
    )
    assert out == before


# ------------------------------------------------------------ (c) what nbgrader reads
@pytest.mark.parametrize("score", [0.0, 0.5, 1.0, 2.0])
def test_verdict_outputs_are_read_by_nbgrader_as_the_score(score):
    cell = _graded_cell(points=2.0)
    cell.outputs = verdict_outputs(Verdict("ex2_dlogits", score, 2.0, ["a line"]))
    assert determine_grade(cell, LOG) == (score, 2.0)


def test_verdict_outputs_show_the_verdicts_text():
    outs = verdict_outputs(Verdict("ex2_dlogits", 0.0, 2.0, ["wrong shape"]))
    assert outs[0].text == "FAIL ex2_dlogits: 0/2 points\n  wrong shape\n"


def test_verdict_outputs_validate_as_notebook_outputs():
    cell = _graded_cell()
    cell.outputs = verdict_outputs(Verdict("ex2_dlogits", 2.0, 2.0), execution_count=7)
    nbformat.validate(new_notebook(cells=[cell]))  # raises when invalid
    assert cell.outputs[1].execution_count == 7


# ------------------------------------------------------------ (d) one real replay
@pytest.fixture(scope="module")
def reference_replay(tmp_path_factory):
    names = find_names_txt()
    if names is None:
        pytest.skip("names.txt not found: set NAMES_TXT")
    if not RELEASE_NB.is_file():
        pytest.skip(f"{RELEASE_NB} not generated")
    course = tmp_path_factory.mktemp("replay_course")
    (course / "source" / spec.ASSIGNMENT).mkdir(parents=True)
    shutil.copy(names, course / "source" / spec.ASSIGNMENT / "names.txt")
    nb = fill(
        nbformat.read(RELEASE_NB, as_version=4), reference_answers(nbformat.read(SOURCE_NB, as_version=4))
    )
    c = Config()
    c.CourseDirectory.root = str(course)
    c.ReplayGrades.sandboxed = False
    resources = {"nbgrader": {"student": "u1", "assignment": spec.ASSIGNMENT}}
    out, _ = ReplayGrades(config=c).preprocess(nb, resources)
    return course, out


def test_reference_solution_every_graded_cell_says_pass(reference_replay):
    _, nb = reference_replay
    texts = {
        c.metadata.nbgrader.grade_id: "".join(o.get("text", "") for o in c.outputs)
        for c in nb.cells
        if is_grade(c)
    }
    assert {gid for gid, t in texts.items() if not t.startswith("PASS")} == set() and len(texts) == len(
        spec.GRADED
    )


def test_reference_solution_record_has_full_score(reference_replay):
    course, _ = reference_replay
    record = json.loads((course / "reports" / "replay" / "u1.json").read_text())
    assert (record["score"], record["max_score"]) == (38, 38)


def test_reference_solution_record_says_it_ran_without_a_sandbox(reference_replay):
    course, _ = reference_replay
    record = json.loads((course / "reports" / "replay" / "u1.json").read_text())
    assert record["problems"][0] == "the replay ran without a sandbox (sandboxed=False)"
