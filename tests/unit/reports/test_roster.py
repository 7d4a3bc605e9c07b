"""grader/reports/roster.py and the LMS exports in-process, without a gradebook: the rosters each
LMS exports, read; canvas.csv and moodle.csv imported by a model of each LMS's documented import
(Moodle: docs.moodle.org "Grade import", CSV: one column mapped to userid, username, useridnumber
or useremail, a grade column mapped to a grade item; Canvas: the gradebook import, a row matched
by ID, then SIS User ID or SIS Login ID, then the name in "Student", and a "Points Possible" row),
fed by what `backprop-ninja collect` learned from a real zip layout."""

from __future__ import annotations

import csv
import io
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from grader.exercise import spec
from grader.incoming.collect import collect_zip
from grader.incoming.lms_names import CANVAS, MOODLE, Learned, read_learned
from grader.reports import exports
from grader.reports.exports import GradebookRow
from grader.reports.roster import CANVAS_USER_ID, Directory, RosterError, read_roster

FULL = {g.grade_id: g.points for g in spec.GRADED}  # 38 points
LOST_EX2 = {**FULL, "ex2_dlogits": 0.0}  # 36


# ---------------------------------------------------------------- the LMS side, as documented
@pytest.fixture
def moodle_users() -> list[dict[str, str]]:
    """Moodle's user table: its user ids are not the assignment's participant ids."""
    return [
        {"id": "31", "username": "alovelace", "idnumber": "S001", "email": "Ada.Lovelace@uni.example"},
        {"id": "32", "username": "aturing", "idnumber": "S002", "email": "alan@uni.example"},
        {"id": "33", "username": "ghopper", "idnumber": "S003", "email": "grace@uni.example"},
    ]


def moodle_import(table, map_from: str, map_to: str, users) -> dict[str, float]:
    """Moodle's "Import grades > CSV file": Identify user by `map_from` -> `map_to`, the grade
    column mapped to the grade item; a user not found aborts the whole import. A row with an empty
    identifier is refused here (Moodle's importer would credit the row's grade to the user before)."""
    field = {"userid": "id", "username": "username", "useridnumber": "idnumber", "useremail": "email"}[map_to]
    rows = list(csv.reader(io.StringIO(_csv_text(table))))
    head, body = rows[0], rows[1:]
    key, grade = head.index(map_from), head.index(exports.TITLE)
    out = {}
    for row in body:
        assert row[key].strip(), f"an empty {map_from}: Moodle would credit the row before"
        found = [u for u in users if u[field] == row[key].strip()]  # emails compared as they are
        assert len(found) == 1, f"User mapping error: could not find user with {map_to} {row[key]!r}"
        value = float(row[grade])
        assert 0 <= value <= 100  # gradepointmax
        out[found[0]["id"]] = value
    return out


@pytest.fixture
def canvas_users() -> list[dict[str, str]]:
    return [
        {
            "id": "1001",
            "name": "Bob Smith",
            "sortable_name": "Smith, Bob",
            "sis_user_id": "U1",
            "login": "bsmith",
        },
        {
            "id": "1002",
            "name": "Eve Jones",
            "sortable_name": "Jones, Eve",
            "sis_user_id": "U2",
            "login": "ejones",
        },
    ]


def canvas_import(table, users) -> tuple[dict[str, float], list[str], str]:
    """Canvas's gradebook import: the header's student columns, the assignment column, the
    "Points Possible" row; each row's user by ID, else SIS User ID, else SIS Login ID, else name.
    Returns grades by Canvas user id, the rows matched to no one, and the points possible."""
    rows = list(csv.reader(io.StringIO(_csv_text(table))))
    head = rows[0]
    assert head[:5] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"], head
    assert len(head) == 6 and head[5].startswith(exports.TITLE)
    points, grades, unknown = "", {}, []
    for row in rows[1:]:
        if "Points Possible" in row[0]:
            points = row[5]
            continue
        name, uid, sis, login = row[0], row[1], row[2], row[3]
        user = next((u for u in users if uid and u["id"] == uid), None)
        user = user or next((u for u in users if sis and u["sis_user_id"] == sis), None)
        user = user or next((u for u in users if login and u["login"] == login), None)
        user = user or next((u for u in users if name and name in (u["name"], u["sortable_name"])), None)
        if user is None:
            unknown.append(name)
            continue
        grades[user["id"]] = float(row[5])
    return grades, unknown, points


def _csv_text(table) -> str:
    out = io.StringIO()
    csv.writer(out).writerows(table)
    return out.getvalue()


def _zip(path: Path, names: list[str]) -> Path:
    nb = b'{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}'
    with zipfile.ZipFile(path, "w") as zf:
        for name in names:
            zf.writestr(name, nb)
    return path


def _write(path: Path, text: str, encoding: str = "utf-8") -> Path:
    path.write_text(text, encoding=encoding)
    return path


# ---------------------------------------------------------------- what the LMS exports, as a roster
WORKSHEET = (
    "Identifier,Full name,Email address,ID number,Status,Grade,Maximum Grade,Grade can be changed,"
    "Last modified (submission),Last modified (grade),Feedback comments\n"
    "Participant 7701,Ada Lovelace,Ada.Lovelace@uni.example,S001,Submitted for grading,,38.00,Yes,"
    '"Monday, 2 March 2026",-,\n'
    "Participant 7702,Alan Turing,alan@uni.example,S002,Submitted for grading,,38.00,Yes,-,-,\n"
    'Participant 7703,Grace Hopper,grace@uni.example,S003,No submission,,38.00,Yes,-,-,"Two\nlines"\n'
)
CANVAS_EXPORT = (
    "Student,ID,SIS User ID,SIS Login ID,Section,Backprop Ninja (77),Current Score\n"
    "    Points Possible,,,,,38,(read only)\n"
    '"Smith, Bob",1001,U1,bsmith,Section A,,\n'
    '"Jones, Eve",1002,U2,ejones,Section B,,\n'
)


@pytest.fixture
def moodle_course(tmp_path) -> Path:
    """A course whose notebooks came from Moodle's zip (participant ids 7701-7703)."""
    course = tmp_path / "course"
    course.mkdir()
    z = _zip(
        tmp_path / "moodle.zip",
        [
            "Ada Lovelace_7701_assignsubmission_file_/backprop_ninja.ipynb",
            "Alan Turing_7702_assignsubmission_file_/backprop_ninja.ipynb",
            "Grace Hopper_7703_assignsubmission_file_backprop_ninja.ipynb",
        ],
    )
    assert len(collect_zip(course=course, zip_path=z).placed) == 3
    return course


MOODLE_ROWS = [GradebookRow("7701", FULL), GradebookRow("7702", LOST_EX2), GradebookRow("7703")]


def test_moodle_zip_ids_are_never_written_and_the_report_says_what_to_pass(moodle_course):
    people = Directory(learned=read_learned(moodle_course))
    moodle = exports.moodle_export(MOODLE_ROWS, people)
    assert moodle.table is None  # no file that would fail to import, or credit the wrong users
    notes = "\n".join(moodle.notes())
    assert "moodle.csv not written" in notes
    assert "7701 (Ada Lovelace), 7702 (Alan Turing), 7703 (Grace Hopper)" in notes
    assert "participant ids" in notes and "--roster" in notes and "grading worksheet" in notes


@pytest.mark.parametrize("map_from,map_to", [("Email address", "useremail"), ("ID number", "useridnumber")])
def test_moodle_with_the_grading_worksheet_imports_onto_the_right_users(
    moodle_course, tmp_path, moodle_users, map_from, map_to
):
    roster = read_roster(_write(tmp_path / "worksheet.csv", WORKSHEET))
    people = Directory(roster, read_learned(moodle_course))
    moodle = exports.moodle_export(MOODLE_ROWS, people)
    assert moodle.table[0] == ["ID number", "Email address", exports.TITLE]
    assert moodle_import(moodle.table, map_from, map_to, moodle_users) == {"31": 38.0, "32": 36.0, "33": 0.0}
    assert moodle.notes() == [
        "moodle.csv: 3 students; Import grades > CSV file: map 'ID number' to useridnumber"
    ]


def test_moodle_course_ids_as_the_course_says_they_are(moodle_users):
    rows = [GradebookRow("alovelace", FULL), GradebookRow("aturing", LOST_EX2)]
    moodle = exports.moodle_export(rows, Directory(moodle_id_column="Username"))
    assert moodle.table[0] == ["Username", exports.TITLE]
    assert moodle_import(moodle.table, "Username", "username", moodle_users) == {"31": 38.0, "32": 36.0}
    assert "(2 of them by their student ids, taken as Moodle's Username" in moodle.notes()[0]
    # by default a course's own ids are taken as ID numbers; the gradebook's emails come along,
    # and on a tie the email, which someone entered, is the one to map
    rows = [
        GradebookRow("S001", FULL, email="Ada.Lovelace@uni.example"),
        GradebookRow("S003", email="grace@uni.example"),
    ]
    moodle = exports.moodle_export(rows)
    assert moodle.table[0] == ["ID number", "Email address", exports.TITLE]
    for map_from, map_to in [("ID number", "useridnumber"), ("Email address", "useremail")]:
        assert moodle_import(moodle.table, map_from, map_to, moodle_users) == {"31": 38.0, "33": 0.0}
    assert moodle.notes() == [
        "moodle.csv: 2 students; Import grades > CSV file: map 'Email address' to useremail"
    ]


def test_moodle_every_identifier_column_is_full_and_the_others_are_listed(tmp_path, moodle_users):
    """Three students with an email (one also with an ID number), one with an ID number only, one
    with nothing: the file holds the three, and its only identifier column is the email (an empty
    ID number would credit the row before)."""
    learned = {
        s: Learned(s, MOODLE, n) for s, n in [("7702", "Alan Turing"), ("7703", "Grace Hopper"), ("7709", "")]
    }
    rows = [
        GradebookRow("S001", FULL, email="Ada.Lovelace@uni.example"),
        GradebookRow("S004"),
        GradebookRow("7702", LOST_EX2, email="alan@uni.example"),
        GradebookRow("7703", email="grace@uni.example"),
        GradebookRow("7709"),
    ]
    moodle = exports.moodle_export(rows, Directory(learned=learned))
    assert moodle.table == [
        ["Email address", exports.TITLE],
        ["Ada.Lovelace@uni.example", "38"],
        ["alan@uni.example", "36"],
        ["grace@uni.example", "0"],
    ]
    assert moodle_import(moodle.table, "Email address", "useremail", moodle_users) == {
        "31": 38.0,
        "32": 36.0,
        "33": 0.0,
    }
    notes = moodle.notes()
    assert notes[0] == "moodle.csv: 3 students; Import grades > CSV file: map 'Email address' to useremail"
    assert "moodle.csv leaves out S004: no Email address" in notes
    assert any(
        n.startswith("moodle.csv leaves out 7709: their ids are Moodle participant ids") for n in notes
    )
    assert notes[-1].endswith("; or --moodle-id-column")  # S004's own id may be Moodle's


def test_moodle_the_admins_bulk_download_gives_the_moodle_user_id(moodle_course, tmp_path, moodle_users):
    bulk = _write(
        tmp_path / "users.csv", "id,username,email,firstname,lastname\n31,alovelace,a@x,Ada,Lovelace\n"
    )
    roster = read_roster(bulk)
    assert roster.kind == "Moodle export" and roster.people[0].moodle["User id"] == "31"
    rows = [GradebookRow("alovelace", FULL)]  # found by username; its Moodle user id known
    moodle = exports.moodle_export(rows, Directory(roster, read_learned(moodle_course)))
    assert moodle.table[0] == ["Email address", "Username", "User id", exports.TITLE]
    assert moodle_import(moodle.table, "User id", "userid", moodle_users) == {"31": 38.0}
    assert exports.canvas_table(rows, people=Directory(roster))[2][0] == "Lovelace, Ada"


@pytest.fixture
def canvas_course(tmp_path) -> Path:
    course = tmp_path / "course"
    course.mkdir()
    z = _zip(
        tmp_path / "canvas.zip",
        ["smithbob_1001_5001_backprop_ninja.ipynb", "jonese_LATE_1002_5002_backprop_ninja.ipynb"],
    )
    assert len(collect_zip(course=course, zip_path=z).placed) == 2
    return course


CANVAS_ROWS = [GradebookRow("1001", FULL), GradebookRow("1002", LOST_EX2)]


def test_canvas_from_the_zip_imports_with_the_zips_names(canvas_course, canvas_users):
    table = exports.canvas_table(
        CANVAS_ROWS, assignment_id="77", people=Directory(learned=read_learned(canvas_course))
    )
    assert [r[0] for r in table[2:]] == ["smithbob", "jonese"]  # the names the zip had, not the ids
    assert canvas_import(table, canvas_users) == ({"1001": 38.0, "1002": 36.0}, [], "38")
    assert table[0][-1] == "Backprop Ninja (77)"


def test_canvas_with_its_gradebook_export_fills_names_sis_ids_and_sections(
    canvas_course, tmp_path, canvas_users
):
    roster = read_roster(_write(tmp_path / "grades.csv", "\ufeff" + CANVAS_EXPORT))  # Canvas writes a BOM
    assert roster.kind == "Canvas gradebook export" and len(roster.people) == 2  # no Points Possible row
    people = Directory(roster, read_learned(canvas_course), canvas_id_column="SIS Login ID")
    table = exports.canvas_table(CANVAS_ROWS, people=people)
    assert table[2:] == [
        ["Smith, Bob", "1001", "U1", "bsmith", "Section A", "38"],
        ["Jones, Eve", "1002", "U2", "ejones", "Section B", "36"],
    ]
    assert canvas_import(table, canvas_users)[0] == {"1001": 38.0, "1002": 36.0}
    assert people.identify("1001").id_is == CANVAS_USER_ID and exports.canvas_notes(CANVAS_ROWS, people) == []


def test_canvas_course_ids_in_the_column_named_and_names_never_the_id(canvas_users):
    rows = [GradebookRow("bsmith", FULL, first_name="Bob", last_name="Smith"), GradebookRow("ejones")]
    table = exports.canvas_table(rows, people=Directory(canvas_id_column="SIS Login ID"))
    assert table[2:] == [["Smith, Bob", "", "", "bsmith", "", "38"], ["", "", "", "ejones", "", "0"]]
    assert canvas_import(table, canvas_users)[0] == {"1001": 38.0, "1002": 0.0}
    with pytest.raises(ValueError):
        Directory(canvas_id_column="Email")
    with pytest.raises(ValueError):
        Directory(moodle_id_column="Student")


def test_canvas_rows_of_moodle_participants_carry_no_id_and_say_so(moodle_course):
    people = Directory(learned=read_learned(moodle_course))
    table = exports.canvas_table(MOODLE_ROWS, people=people)
    assert [r[:4] for r in table[2:]] == [
        ["Ada Lovelace", "", "", ""],
        ["Alan Turing", "", "", ""],
        ["Grace Hopper", "", "", ""],
    ]
    assert "no Canvas id for 7701 (Ada Lovelace)" in exports.canvas_notes(MOODLE_ROWS, people)[0]


def test_a_name_from_the_roster_then_the_gradebook_then_the_zip(tmp_path):
    roster = read_roster(_write(tmp_path / "r.csv", "First name,Last name,ID number\nAda,Lovelace,S001\n"))
    learned = {"S001": Learned("S001", "", "zip name"), "S002": Learned("S002", CANVAS, "zipname")}
    people = Directory(roster, learned)
    assert people.identify("S001", gradebook_name="Gradebook, Name").name == "Lovelace, Ada"
    assert people.identify("S003", gradebook_name="Gradebook, Name").name == "Gradebook, Name"
    assert people.identify("S002").name == "zipname"
    assert people.identify("S004").name == ""


# ---------------------------------------------------------------- reading rosters
def test_the_worksheets_participant_ids_and_identity_fields(tmp_path):
    roster = read_roster(_write(tmp_path / "w.csv", WORKSHEET))
    assert roster.kind == "Moodle grading worksheet"
    ada = roster.people[0]
    assert (ada.name, ada.participant) == ("Ada Lovelace", "7701") and len(roster.people) == 3
    assert ada.moodle == {"ID number": "S001", "Email address": "Ada.Lovelace@uni.example"}


def test_a_moodle_grade_export_separated_by_tabs_or_semicolons(tmp_path):
    for sep in ["\t", ";"]:
        text = sep.join(["First name", "Last name", "ID number", "Institution", "Email address"]) + "\n"
        text += sep.join(["Alan", "Turing", "S002", "Uni", "alan@uni.example"]) + "\n"
        people = read_roster(_write(tmp_path / "g.csv", text)).people
        assert [(p.name, p.moodle) for p in people] == [
            ("Turing, Alan", {"ID number": "S002", "Email address": "alan@uni.example"})
        ], repr(sep)


def test_a_file_that_identifies_no_one_is_refused(tmp_path):
    with pytest.raises(RosterError, match="none of the columns"):
        read_roster(_write(tmp_path / "n.csv", "Name,Grade\nAda,38\n"))
    with pytest.raises(RosterError, match="could not be read"):
        read_roster(
            _write(tmp_path / "l.csv", "Identifier,Full name\nParticipant 1,\xe9\n", encoding="latin-1")
        )


def test_an_id_that_fits_two_rows_fits_none(tmp_path, moodle_users):
    """A course's own id 7702: one row's participant id, another's ID number. Taking it as an ID
    number would credit Someone Else: it is left out, and said."""
    text = (
        "Identifier,Full name,ID number,Email address\nParticipant 7702,Alan Turing,S002,alan@uni.example\n"
    )
    text += "Participant 9999,Someone Else,7702,else@x\n"
    people = Directory(read_roster(_write(tmp_path / "w.csv", text)))
    me = people.identify("7702")
    assert (me.in_roster, me.name, me.moodle, me.canvas) == ("fits 2 rows", "", {}, {})
    moodle = exports.moodle_export([GradebookRow("7702"), GradebookRow("S002", LOST_EX2)], people)
    assert moodle.table == [["ID number", "Email address", exports.TITLE], ["S002", "alan@uni.example", "36"]]
    assert moodle_import(moodle.table, "ID number", "useridnumber", moodle_users) == {"32": 36.0}
    assert "moodle.csv leaves out 7702: each id fits several rows of the roster" in moodle.notes()
    # an id the roster's ID numbers do not hold is not taken as one (Moodle would stop the import)
    assert people.identify("S009").moodle == {} and people.identify("S009").canvas == {"ID": "S009"}
    # a student collected from Moodle's zip is matched on the participant id only
    assert Directory(people.roster, {"7702": Learned("7702", MOODLE)}).identify("7702").name == "Alan Turing"


def test_emails_match_whatever_their_case_and_are_written_as_moodle_has_them(tmp_path):
    people = Directory(read_roster(_write(tmp_path / "w.csv", WORKSHEET)))
    me = people.identify("ada.lovelace@UNI.example")
    assert me.in_roster == "found" and me.moodle["Email address"] == "Ada.Lovelace@uni.example"
    assert people.summary(["ada.lovelace@UNI.example", "nobody"]) == [
        "roster w.csv (read as Moodle grading worksheet, 3 rows): "
        "1 of 2 students found; not: nobody (not found)"
    ]


# ---------------------------------------------------------------- write_all, on a stand-in gradebook
class _Gradebook:
    """What exports.gradebook_rows reads of nbgrader's Gradebook: students, and their notebooks."""

    def __init__(self, scores: dict[str, dict[str, float]], emails: dict[str, str] | None = None):
        self.scores = scores
        emails = emails or {}
        self.students = [
            SimpleNamespace(id=s, first_name=None, last_name=None, email=emails.get(s)) for s in scores
        ]

    def find_submission_notebook(self, notebook, assignment, student):
        grades = [SimpleNamespace(name=g, score=v) for g, v in self.scores[student].items()]
        return SimpleNamespace(grades=grades)


def test_write_all_writes_no_moodle_csv_it_cannot_import_and_removes_an_older_one(moodle_course, tmp_path):
    folder = tmp_path / "exports"
    folder.mkdir()
    (folder / "moodle.csv").write_text("ID number,Backprop Ninja\n7701,38\n")  # what the old version wrote
    gb = _Gradebook({"7701": FULL, "7702": LOST_EX2})
    written = exports.write_all(gb, folder, people=Directory(learned=read_learned(moodle_course)))
    assert [p.name for p in written.paths] == ["gradients.csv", "canvas.csv"]
    assert not (folder / "moodle.csv").exists()
    assert (
        written.notes[-1] == "moodle.csv: the older exports/moodle.csv removed (it would import stale grades)"
    )
    assert any("leaves out 7701 (Ada Lovelace), 7702 (Alan Turing)" in n for n in written.notes)
    # with the gradebook's emails, a file Moodle can import
    gb = _Gradebook(
        {"7701": FULL, "7702": LOST_EX2}, {"7701": "Ada.Lovelace@uni.example", "7702": "alan@uni.example"}
    )
    written = exports.write_all(gb, folder, people=Directory(learned=read_learned(moodle_course)))
    assert [p.name for p in written.paths] == ["gradients.csv", "canvas.csv", "moodle.csv"]
    with open(folder / "moodle.csv", newline="") as f:
        table = list(csv.reader(f))
    assert table == [
        ["Email address", exports.TITLE],
        ["Ada.Lovelace@uni.example", "38"],
        ["alan@uni.example", "36"],
    ]
