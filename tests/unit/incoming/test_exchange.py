"""configure_exchange: the course-local exchange root in the config, and the folders nbgrader 0.9.6
expects made with its permissions (plus sticky bits), given to the course's owner."""

from __future__ import annotations

import os
import pwd
from datetime import datetime, timedelta, timezone

import pytest
from traitlets.config import Config

from grader.incoming import exchange


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


# ---------------------------------------------------------------- SafeCollect, through the formgrader's API
ME = pwd.getpwuid(os.getuid()).pw_name


def stamp(minutes_ago: int = 1) -> str:
    """A time in nbgrader's format, taken when the test runs: one taken at import would be older
    than its files by as long as the suite ran before it, and collect keeps the later time."""
    return f"{datetime.now(timezone.utc) - timedelta(minutes=minutes_ago):%Y-%m-%d %H:%M:%S.%f} UTC"


def api_for(course, **collect):
    """The NbGraderAPI the formgrader builds (nbgrader.server_extensions.formgrader.base), on a
    config made by configure_exchange."""
    from nbgrader.apps.api import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    c = Config()
    c.CourseDirectory.root = str(course)
    c.CourseDirectory.course_id = "backprop_ninja"
    c.CourseDirectory.db_url = f"sqlite:///{course / 'gradebook.db'}"
    for key, value in collect.items():
        setattr(c.ExchangeCollect, key, value)
    exchange.configure_exchange(c, course_root=course)
    return NbGraderAPI(CourseDirectory(config=c), config=c)


def put(course, name: str, text: str, timestamp: str | None = None):
    folder = course / "exchange" / "backprop_ninja" / "inbound" / name
    folder.mkdir()
    (folder / "backprop_ninja.ipynb").write_text(text)
    (folder / "timestamp.txt").write_text(timestamp or name.split("+")[2])
    return folder


def collected(course, student: str) -> str:
    return (course / "submitted" / student / "backprop_ninja" / "backprop_ninja.ipynb").read_text()


def test_the_formgraders_collect_is_safe_collect(tmp_path):
    api = api_for(tmp_path)
    app = api.exchange.Collect(coursedir=api.coursedir, authenticator=api.authenticator, parent=api)
    assert isinstance(app, exchange.SafeCollect) and api.exchange_is_functional


@pytest.mark.integration
def test_collect_button_refuses_forged_and_future_folders(tmp_path):
    api, now = api_for(tmp_path), stamp()
    put(tmp_path, f"{ME}+backprop_ninja+{now}+a", "mine", timestamp="2000-01-01 00:00:00.000000 UTC")
    put(tmp_path, f"{ME}+backprop_ninja+2099-01-01 00:00:00.000000 UTC+b", "mine, from 2099")
    put(tmp_path, f"bob+backprop_ninja+{now}+c", "planted for bob")
    put(tmp_path, f"{ME}+backprop_ninja+", "not a name nbgrader could read")  # stopped nbgrader's collect
    result = api.collect("backprop_ninja")
    assert result["success"], result
    assert collected(tmp_path, ME) == "mine" and not (tmp_path / "submitted" / "bob").exists()
    assert (tmp_path / "submitted" / ME / "backprop_ninja" / "timestamp.txt").read_text() == now
    log = result["log"]
    assert f"REFUSED inbound/'bob+backprop_ninja+{now}+c' (owner {ME}): named for bob but made by {ME}" in log
    assert "2099-01-01 00:00:00 UTC, in the future" in log and "'' is not a time" in log
    assert f"Collecting submission: {ME} backprop_ninja" in log


@pytest.mark.integration
def test_a_refused_copy_falls_back_to_the_previous_submission(tmp_path):
    api, now, earlier = api_for(tmp_path), stamp(), stamp(2)
    put(tmp_path, f"{ME}+backprop_ninja+{earlier}+a", "earlier")
    later = put(tmp_path, f"{ME}+backprop_ninja+{now}+b", "later")
    (later / "names.txt").symlink_to(tmp_path / "gradebook.db")
    result = api.collect("backprop_ninja")
    assert collected(tmp_path, ME) == "earlier"
    assert f"REFUSED inbound/'{later.name}' (owner {ME}): names.txt: a link" in result["log"]


@pytest.mark.integration
def test_without_check_owner_names_are_believed_out_loud(tmp_path):
    api = api_for(tmp_path, check_owner=False)
    put(tmp_path, f"bob+backprop_ninja+{stamp()}+c", "bob's, by one account playing two")
    result = api.collect("backprop_ninja")
    assert collected(tmp_path, "bob") == "bob's, by one account playing two"
    assert exchange.NO_OWNER_CHECK in result["log"]
