"""grader/reports/exports.py in-process, on a gradebook built through nbgrader's API: the CSV
columns and values, the LMS layouts, and the nbgrader export plugin writing the same file."""

from __future__ import annotations

import csv
import logging

import pytest
from fake_class import HOSTILE, LOST, MANUAL, NO_SUBMISSION, expected, make_class, make_gradebook
from nbgrader.api import Gradebook

from grader.exercise import spec
from grader.reports import exports, report, scores
from grader.reports.exports import CanvasExportPlugin, GradientsExportPlugin, MoodleExportPlugin

GRADE_IDS = [g.grade_id for g in spec.GRADED]
# nbgrader's own add_submission makes SQLAlchemy warn; not this code's concern
pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")]


@pytest.fixture
def course(tmp_path):
    return make_class(tmp_path / "course")


def _rows(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


def _written(course):
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        return exports.write_all(gb, course / "exports")


def test_gradients_csv_has_every_grade_id_in_spec_order_then_subtotals(course):
    _written(course)
    head = _rows(course / "exports" / "gradients.csv")[0]
    assert len(GRADE_IDS) == 36 and head[1:37] == GRADE_IDS
    assert head == ["student_id", *GRADE_IDS, "ex1", "ex2", "ex3", "ex4", "total"]


def test_gradients_csv_values_are_the_gradebooks(course):
    _written(course)
    with open(course / "exports" / "gradients.csv", newline="") as f:
        rows = {r["student_id"]: r for r in csv.DictReader(f)}
    assert sorted(rows) == sorted([*LOST, NO_SUBMISSION])
    for student in LOST:
        want = expected(student)
        assert {g: float(rows[student][g]) for g in GRADE_IDS} == want, student
        for e in (1, 2, 3, 4):
            lost = sum(v for k, v in want.items() if spec.BY_GRADE_ID[k].exercise == e)
            assert float(rows[student][f"ex{e}"]) == lost
        assert float(rows[student]["total"]) == sum(want.values())
    assert float(rows[MANUAL[0]][MANUAL[1]]) == MANUAL[2]  # the TA's score, not the autograder's 2
    assert float(rows["ben"]["total"]) == spec.total_points() - 3  # dbndiff2 (1) and ex3 (2) lost
    assert all(rows[NO_SUBMISSION][g] == "" for g in GRADE_IDS) and rows[NO_SUBMISSION]["total"] == "0"


def test_canvas_csv_layout(course):
    _written(course)
    rows = _rows(course / "exports" / "canvas.csv")
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Backprop Ninja"]
    assert rows[1] == ["Points Possible", "", "", "", "", "38"]
    by_id = {r[1]: r for r in rows[2:]}
    assert by_id["ben"] == ["Doe, Ben", "ben", "", "", "", "35"]
    assert by_id[HOSTILE][1] == HOSTILE  # csv quoting keeps the id as it is
    assert by_id[NO_SUBMISSION][-1] == "0"


def test_canvas_assignment_id_and_sis_column():
    rows = [exports.GradebookRow("ben", by_grade_id={"ex2_dlogits": 2.0})]
    table = exports.canvas_table(rows, assignment_id="1234", id_column="SIS Login ID")
    assert table[0][-1] == "Backprop Ninja (1234)"
    assert table[2] == ["ben", "", "", "ben", "", "2"]
    with pytest.raises(ValueError):
        exports.canvas_table(rows, id_column="Email")


def test_moodle_csv_layout(course):
    _written(course)
    rows = _rows(course / "exports" / "moodle.csv")
    assert rows[0] == ["ID number", "Email address", "Backprop Ninja"]
    assert ["ann", "ann@uni.example", "38"] in rows and ["dan", "dan@uni.example", "0"] in rows


@pytest.mark.parametrize(
    "plugin,name",
    [(GradientsExportPlugin, "gradients"), (CanvasExportPlugin, "canvas"), (MoodleExportPlugin, "moodle")],
)
def test_plugins_write_the_same_csv(course, tmp_path, plugin, name):
    _written(course)
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        plugin(to=str(tmp_path / "out.csv"), log=logging.getLogger("test")).export(gb)
    assert _rows(tmp_path / "out.csv") == _rows(course / "exports" / f"{name}.csv")


def test_plugin_default_name_and_student_filter(tmp_path, monkeypatch):
    make_gradebook(tmp_path)
    monkeypatch.chdir(tmp_path)
    with Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}") as gb:
        GradientsExportPlugin(student=["ben", "ann"], log=logging.getLogger("test")).export(gb)
    rows = _rows(tmp_path / "gradients.csv")
    assert [r[0] for r in rows[1:]] == ["ann", "ben"]


def test_report_main_prints_the_table_and_writes_everything(course, capsys):
    assert report.main([str(course)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(report.table(scores.read_scores(f"sqlite:///{course / 'gradebook.db'}")) + "\n")
    for rel in ("exports/gradients.csv", "exports/canvas.csv", "exports/moodle.csv", "reports/class.html"):
        assert (course / rel).is_file() and rel in out
