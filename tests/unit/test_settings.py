"""grader/settings.py: environment variables with typed defaults, every one the kit reads
listed once, every limit of the trusted side defined there, and where the per-student records go."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest

from grader import settings
from grader.confine.bwrap import Limits
from grader.exercise import data

GRADER = Path(settings.__file__).resolve().parent
NAMES = sorted(settings.ENVIRONMENT)
# a whole variable name; a bare "BACKPROP_NINJA_" prefix (os.environ filters) is not one
ENV_NAME = re.compile(r"\bBACKPROP_NINJA_[A-Z0-9_]*[A-Z0-9]\b")


# ------------------------------------------------------------ env()
@pytest.mark.parametrize("name", NAMES)
def test_env_unset_is_the_default(name, monkeypatch):
    monkeypatch.delenv(name, raising=False)
    assert settings.env(name) == settings.ENVIRONMENT[name][0]


@pytest.mark.parametrize("name", NAMES)
def test_env_empty_is_the_default(name, monkeypatch):
    monkeypatch.setenv(name, "")
    assert settings.env(name) == settings.ENVIRONMENT[name][0]


@pytest.mark.parametrize("name", NAMES)
def test_env_set_has_the_defaults_type(name, monkeypatch):
    monkeypatch.setenv(name, "7")
    default = settings.ENVIRONMENT[name][0]
    value = settings.env(name)
    assert (type(value), value) == (type(default), type(default)("7"))


def test_env_float_from_an_integer_string(monkeypatch):
    monkeypatch.setenv("BACKPROP_NINJA_STATEMENT_SECONDS", "3")
    assert repr(settings.env("BACKPROP_NINJA_STATEMENT_SECONDS")) == "3.0"


def test_env_unknown_name_is_an_error():
    with pytest.raises(KeyError):
        settings.env("BACKPROP_NINJA_NOT_A_SETTING")


def test_every_environment_entry_says_what_it_bounds():
    assert [n for n, (_, what) in settings.ENVIRONMENT.items() if not what.strip()] == []


# ------------------------------------------------------------ ENVIRONMENT lists them all
def _kit_sources():
    return sorted(p for p in GRADER.rglob("*") if p.is_file() and p.suffix in (".py", ".json"))


def test_the_grep_finds_the_kits_variables():
    used = {m for p in _kit_sources() for m in ENV_NAME.findall(p.read_text())}
    assert "BACKPROP_NINJA_FIRST_UID" in used


def test_every_backprop_ninja_variable_in_grader_is_in_environment():
    used = {m for p in _kit_sources() for m in ENV_NAME.findall(p.read_text())}
    assert used - set(settings.ENVIRONMENT) == set()


def test_every_sandbox_limit_field_is_an_environment_variable():
    """Limits builds its names as BACKPROP_NINJA_<FIELD> (the grep cannot see them)."""
    names = {f"BACKPROP_NINJA_{f.name.upper()}" for f in dataclasses.fields(Limits)}
    assert names - set(settings.ENVIRONMENT) == set()


def test_names_txt_variable_is_in_environment():
    assert data.ENV_VAR in settings.ENVIRONMENT


def test_the_untrusted_side_reads_no_setting():
    """The module docstring: grader/untrusted/ gets its values in the replay plan."""
    hits = {
        p.name
        for p in (GRADER / "untrusted").rglob("*.py")
        if ENV_NAME.search(p.read_text())
        or "grader.settings" in p.read_text()
        or re.search(r"from \.\.settings|from \.\. import settings", p.read_text())
    }
    assert hits == set()


# ------------------------------------------------------------ report_dir()
@pytest.fixture(autouse=True)
def _no_running_app(monkeypatch):
    """report_dir() prefers a running nbgrader's configuration: these tests read the file."""
    from traitlets.config import Application

    monkeypatch.setattr(Application, "initialized", classmethod(lambda cls: False))


def test_report_dir_defaults_to_reports_without_a_config(tmp_path):
    assert settings.report_dir(tmp_path) == tmp_path / "reports"


def test_report_dir_defaults_to_reports_when_the_config_does_not_set_it(tmp_path):
    (tmp_path / "nbgrader_config.py").write_text("c = get_config()\nc.CourseDirectory.course_id = 'x'\n")
    assert settings.report_dir(tmp_path) == tmp_path / "reports"


def test_report_dir_honours_the_courses_nbgrader_config(tmp_path):
    (tmp_path / "nbgrader_config.py").write_text(
        "c = get_config()\nc.ReplayGrades.report_dir = 'elsewhere'\n"
    )
    assert settings.report_dir(tmp_path) == tmp_path / "elsewhere"


def test_report_dir_default_is_the_traits_default():
    from grader.preprocessors.replay_grades import ReplayGrades

    assert ReplayGrades.class_traits()["report_dir"].default_value == settings.REPORT_DIR == "reports"


# ------------------------------------------------------------ every limit of the trusted side is here
LIMIT_NAME = re.compile(r"^(MAX_[A-Z0-9_]+|[A-Z0-9_]+_(SECONDS|BYTES|MB))$")
# The untrusted side cannot import settings.py (the sandbox mounts only these folders): its limits,
# and those both sides use (grader/untrusted/protocol.py's MAX_FRAME_BYTES), stay there.
UNTRUSTED = ("untrusted", "exercise")
# Named like a limit, and not one: why
NOT_LIMITS = {
    ("reports/similarity.py", "MAX_HOLDERS"): "MOSS's -m: a fingerprint this many students hold is "
    "common knowledge (a detection parameter, the larger of it and 5% of the class)",
}


def _numeric(node: ast.expr) -> bool:
    """A number, or arithmetic on numbers and other constants' names (50 * 2**20, 4 * MAX_X)."""
    if isinstance(node, ast.Constant):
        return type(node.value) in (int, float)
    if isinstance(node, ast.UnaryOp):
        return _numeric(node.operand)
    if isinstance(node, ast.BinOp):
        return all(_numeric(n) or isinstance(n, ast.Name) for n in (node.left, node.right))
    return False


def _module_constants(tree: ast.Module):
    """(name, value) of each module-level assignment, `A, B = 1, 2` included."""
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign):
            targets = stmt.targets
        elif isinstance(stmt, ast.AnnAssign):
            targets = [stmt.target]
        else:
            continue
        for target in targets:
            if isinstance(target, ast.Name) and stmt.value is not None:
                yield target.id, stmt.value
            elif isinstance(target, ast.Tuple) and isinstance(stmt.value, ast.Tuple):
                yield from (
                    (t.id, v) for t, v in zip(target.elts, stmt.value.elts) if isinstance(t, ast.Name)
                )


def test_every_limit_of_the_trusted_side_is_in_settings():
    """A module-level numeric constant named like a limit (MAX_*, *_SECONDS, *_BYTES, *_MB; a
    leading underscore does not hide it) outside settings.py and the untrusted side is a limit
    that belongs in settings.py: the module imports it from there instead."""
    found = []
    for path in sorted(GRADER.rglob("*.py")):
        rel = path.relative_to(GRADER).as_posix()
        if rel == "settings.py" or rel.split("/")[0] in UNTRUSTED:
            continue
        for name, value in _module_constants(ast.parse(path.read_text())):
            if LIMIT_NAME.match(name.lstrip("_")) and _numeric(value) and (rel, name) not in NOT_LIMITS:
                found.append(f"{rel}: {name}")
    assert found == []


def test_the_limits_test_sees_limits():
    tree = ast.parse(
        "MAX_A = 50 * 2**20\n_MAX_B = 200\nC_SECONDS: float = 1.0\nMAX_D, E_MB = 1, 2\nMAX_S = 'x'\n"
    )
    named = [n for n, v in _module_constants(tree) if LIMIT_NAME.match(n.lstrip("_")) and _numeric(v)]
    assert named == ["MAX_A", "_MAX_B", "C_SECONDS", "MAX_D", "E_MB"]
