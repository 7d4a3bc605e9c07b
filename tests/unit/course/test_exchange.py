"""configure_exchange: the course-local exchange root in the config, and the folders nbgrader 0.9.6
expects made with its permissions (plus sticky bits), given to the course's owner."""

from __future__ import annotations

import os

import pytest
from traitlets.config import Config

from grader.course import exchange


def mode(path) -> int:
    return os.stat(path).st_mode & 0o7777


def test_sets_the_root_and_makes_the_folders(tmp_path):
    c = Config()
    c.CourseDirectory.course_id = "backprop_ninja"
    root = exchange.configure_exchange(c, course_root=tmp_path)
    assert root == tmp_path.resolve() / "exchange" and c.Exchange.root == str(root)
    course = root / "backprop_ninja"
    assert [mode(root), mode(course), mode(course / "outbound"), mode(course / "inbound")] == [
        0o1777,
        0o755,
        0o755,
        0o3733,
    ]


def test_existing_folders_are_left_as_they_are(tmp_path):
    (tmp_path / "exchange").mkdir(mode=0o700)
    os.chmod(tmp_path / "exchange", 0o700)
    c = Config()
    exchange.configure_exchange(c, course_root=tmp_path, course_id="other")
    assert c.CourseDirectory.course_id == "other"
    assert mode(tmp_path / "exchange") == 0o700  # nbgrader's release decides about it
    assert mode(tmp_path / "exchange" / "other" / "inbound") == 0o3733


def test_a_course_id_is_required(tmp_path):
    with pytest.raises(ValueError, match="course_id"):
        exchange.configure_exchange(Config(), course_root=tmp_path)
    assert not (tmp_path / "exchange").exists()


def test_groupshared_folders_are_left_to_nbgrader(tmp_path):
    c = Config()
    c.CourseDirectory.course_id = "backprop_ninja"
    c.CourseDirectory.groupshared = True
    exchange.configure_exchange(c, course_root=tmp_path)
    assert c.Exchange.root == str(tmp_path.resolve() / "exchange") and not (tmp_path / "exchange").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="giving folders away needs root")
def test_as_root_the_folders_go_to_the_course_owner(tmp_path):
    course = tmp_path / "course"
    course.mkdir()
    os.chown(course, 4321, 4322)
    exchange.prepare_exchange(course_root=course, course_id="backprop_ninja")
    for path in ("exchange", "exchange/backprop_ninja", "exchange/backprop_ninja/inbound"):
        st = os.stat(course / path)
        assert (st.st_uid, st.st_gid) == (4321, 4322), path


def test_student_config_and_command_line(tmp_path, capsys):
    text = exchange.student_config(course_root=tmp_path)
    c = Config()
    exec(compile(text, "nbgrader_config.py", "exec"), {"get_config": lambda: c})
    assert c.Exchange.root == str(tmp_path.resolve() / "exchange")
    assert c.CourseDirectory.course_id == "backprop_ninja"
    assert exchange.main([str(tmp_path)]) == 0 and capsys.readouterr().out == text
    assert exchange.main([]) == 2


def test_the_formgrader_finds_a_working_exchange_before_any_release(tmp_path):
    from nbgrader.apps.api import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    c = Config()
    c.CourseDirectory.root = str(tmp_path)
    c.CourseDirectory.course_id = "backprop_ninja"
    without = NbGraderAPI(CourseDirectory(config=c), config=c)
    assert without.exchange_missing or os.path.isdir("/usr/local/share/nbgrader/exchange")  # the default
    exchange.configure_exchange(c, course_root=tmp_path)
    api = NbGraderAPI(CourseDirectory(config=c), config=c)
    assert api.exchange_root == str(tmp_path.resolve() / "exchange") and api.exchange_is_functional
