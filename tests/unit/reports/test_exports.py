"""grader/reports/exports.py in-process, on a gradebook built through nbgrader's API: the CSV
columns and values, the LMS layouts, and the nbgrader export plugin writing the same file."""

from __future__ import annotations

import csv
import logging

import pytest
from fake_class import HOSTILE, LOST, MANUAL, NO_SUBMISSION, expected, make_class, make_gradebook
from nbgrader.api import Gradebook

from grader.exercise import spec
from grader.incoming.lms_names import CANVAS, MOODLE, Learned, record_learned
from grader.reports import exports, report, scores
from grader.reports.exports import CanvasExportPlugin, GradientsExportPlugin, MoodleExportPlugin
from grader.reports.roster import Directory

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
    table = exports.canvas_table(
        rows, assignment_id="1234", people=Directory(canvas_id_column="SIS Login ID")
    )
    assert table[0][-1] == "Backprop Ninja (1234)"
    assert table[2] == ["", "", "", "ben", "", "2"]  # no name known: Student is empty, never the id
    with pytest.raises(ValueError):
        Directory(canvas_id_column="Email")


def test_moodle_csv_layout(course):
    _written(course)
    rows = _rows(course / "exports" / "moodle.csv")
    assert rows[0] == ["ID number", "Email address", "Backprop Ninja"]
    assert ["ann", "ann@uni.example", "38"] in rows and ["dan", "dan@uni.example", "0"] in rows


@pytest.mark.parametrize(
    "plugin,name",
    [(GradientsExportPlugin, "gradients"), (CanvasExportPlugin, "canvas"), (MoodleExportPlugin, "moodle")],
)
def test_plugins_write_the_same_csv(course, tmp_path, plugin, name, monkeypatch):
    _written(course)
    monkeypatch.chdir(course)  # where nbgrader runs: the plugins read what collect learned there
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        plugin(to=str(tmp_path / "out.csv"), log=logging.getLogger("test")).export(gb)
    assert _rows(tmp_path / "out.csv") == _rows(course / "exports" / f"{name}.csv")


def test_moodle_plugin_with_a_roster_and_what_collect_learned(course, tmp_path, monkeypatch, caplog):
    """Students collected from Moodle's zip: their participant ids are never an ID number."""
    record_learned(course, [Learned(s, MOODLE, s.title()) for s in ("ann", "ben")])
    roster = tmp_path / "worksheet.csv"
    roster.write_text("Identifier,Full name,ID number\nParticipant ann,Ann Doe,S1\n")
    monkeypatch.chdir(course)
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        log = logging.getLogger("test")
        MoodleExportPlugin(to=str(tmp_path / "m.csv"), roster=str(roster), log=log).export(gb)
    rows = _rows(tmp_path / "m.csv")
    assert rows[0] == ["Email address", "Backprop Ninja"]  # every row has one; not every row an ID number
    assert ["ann@uni.example", "38"] in rows and ["ben@uni.example", "35"] in rows
    assert not any(r[0] in ("ann", "ben") for r in rows)


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
    assert "moodle.csv: 5 students; Import grades > CSV file: map 'Email address' to useremail" in out


def test_report_main_with_a_roster_and_collects_record(course, tmp_path, capsys):
    record_learned(course, [Learned("ben", MOODLE, "Ben D"), Learned("cat", CANVAS, "doecat")])
    roster = tmp_path / "canvas.csv"
    roster.write_text('Student,ID,SIS User ID,SIS Login ID,Section\n"Doe, Catherine",cat,U3,cdoe,Sec 1\n')
    assert report.main([str(course), "--roster", str(roster), "--canvas-id-column", "SIS User ID"]) == 0
    out = capsys.readouterr().out
    assert "roster canvas.csv (read as Canvas gradebook export, 1 row): 1 of 5 students found" in out
    canvas = {r[0]: r for r in _rows(course / "exports" / "canvas.csv")[2:]}
    total = f"{sum(expected('cat').values()):g}"
    assert canvas["Doe, Catherine"] == ["Doe, Catherine", "cat", "U3", "cdoe", "Sec 1", total]
    # ann's own id is none of the roster's SIS User IDs: taking it as one would match no one
    assert canvas["Doe, Ann"][1:4] == ["", "", ""] and canvas["Doe, Dan"][1:4] == ["", "", ""]
    assert canvas["Doe, Ben"][1:4] == ["", "", ""]  # a Moodle participant id is no Canvas id
    note = next(line for line in out.splitlines() if line.startswith("canvas.csv: no Canvas id for"))
    assert "ann (Doe, Ann), ben (Doe, Ben), dan (Doe, Dan)" in note and "cat" not in note


def test_report_main_refuses_a_roster_it_cannot_read(course, tmp_path, capsys):
    (tmp_path / "r.csv").write_text("Name,Grade\n")
    assert report.main([str(course), "--roster", str(tmp_path / "r.csv")]) == 2
    assert "none of the columns an LMS export identifies students by" in capsys.readouterr().err
    assert not (course / "exports").exists()
