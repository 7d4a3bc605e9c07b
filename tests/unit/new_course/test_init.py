"""grader/new_course/init.py in-process: `backprop-ninja init` writes a course from the
installed package (the repository's own config and notebook, the course id set), never into
a folder that holds something, and says what stops it."""

from __future__ import annotations

import filecmp

import pytest

from grader.exercise import spec
from grader.new_course import init

from conftest import ROOT


def test_a_course_holds_the_kits_config_notebook_and_data(tmp_path, names_txt):
    course = tmp_path / "ml101"
    done = init.make_course(course, course_id="ml101-2027", names_source=str(names_txt))
    assignment = course / "source" / spec.ASSIGNMENT
    assert filecmp.cmp(
        assignment / f"{spec.NOTEBOOK}.ipynb",
        ROOT / "source" / spec.ASSIGNMENT / f"{spec.NOTEBOOK}.ipynb",
        shallow=False,
    )
    assert filecmp.cmp(assignment / "names.txt", names_txt, shallow=False)
    config = (course / "nbgrader_config.py").read_text()
    assert 'c.CourseDirectory.course_id = "ml101-2027"' in config
    assert config.replace('"ml101-2027"', '"backprop_ninja"') == (ROOT / "nbgrader_config.py").read_text()
    assert len(done) == 3 and "32033 names" in done[2]


def test_init_never_writes_into_a_folder_that_holds_something(tmp_path, names_txt):
    (tmp_path / "course").mkdir()
    (tmp_path / "course" / "notes.md").write_text("mine")
    with pytest.raises(init.InitError, match="not an empty folder"):
        init.make_course(tmp_path / "course", course_id="x", names_source=str(names_txt))
    assert sorted(p.name for p in (tmp_path / "course").iterdir()) == ["notes.md"]
    init.make_course(tmp_path / "empty", course_id="x", names_source=str(names_txt))  # absent: made


@pytest.mark.parametrize("bad", ["", "a b", "../up", "x" * 65, 'q"uote'])
def test_a_course_id_nbgrader_and_the_exchange_can_use(bad):
    with pytest.raises(init.InitError, match="course id"):
        init.config_text(bad)


def test_a_missing_names_txt_is_said_and_main_exits_2(tmp_path, capsys):
    code = init.main([str(tmp_path / "c"), "--names-txt", str(tmp_path / "absent.txt")])
    assert code == 2 and "names.txt" in capsys.readouterr().err
