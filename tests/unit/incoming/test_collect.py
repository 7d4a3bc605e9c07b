"""`backprop-ninja collect`: Canvas and Moodle zips, built here, into submitted/; the latest
notebook of each student kept; a hostile zip's entries refused without anything written outside
the course."""

from __future__ import annotations

import stat
import zipfile
from pathlib import Path

import pytest

from grader import cli
from grader.incoming.collect import Placed, collect_zip, main
from grader.incoming.lms_names import LEARNED, Learned, read_learned

NB = Path("backprop_ninja") / "backprop_ninja.ipynb"
NOT_AN_ID = "is not a valid student id (an LMS user id is digits)"


def nb(tag: str) -> bytes:
    return ('{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5, "tag": "%s"}' % tag).encode()


def make_zip(path: Path, entries) -> Path:
    """entries: (name, bytes) or (ZipInfo, bytes)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in entries:
            zf.writestr(name, data)
    return path


def submitted(course: Path, student: str) -> bytes:
    return (course / "submitted" / student / NB).read_bytes()


def reasons(result) -> dict[str, str]:
    return {s.entry: s.reason for s in result.skipped}


@pytest.fixture
def course(tmp_path) -> Path:
    (tmp_path / "course").mkdir()
    return tmp_path / "course"


def test_canvas_names_place_each_student_and_mark_late_work(course, tmp_path):
    z = make_zip(
        tmp_path / "canvas.zip",
        [
            ("smithbob_1001_5001_backprop_ninja.ipynb", nb("bob")),
            ("joneseve_LATE_1002_5002_backprop_ninja.ipynb", nb("eve")),
            ("smithbob_1001_5001_notes.pdf", b"%PDF-1.4"),
        ],
    )
    result = collect_zip(course=course, zip_path=z)
    assert submitted(course, "1001") == nb("bob") and submitted(course, "1002") == nb("eve")
    assert [(p.student, p.lms, p.late) for p in result.placed] == [
        ("1001", "Canvas", False),
        ("1002", "Canvas", True),
    ]
    assert reasons(result) == {"smithbob_1001_5001_notes.pdf": "not a notebook"}
    text = result.summary()
    assert "placed   1002 <- joneseve_LATE_1002_5002_backprop_ninja.ipynb (Canvas; late)" in text
    assert "skipped  smithbob_1001_5001_notes.pdf: not a notebook" in text
    assert text.endswith("2 notebooks placed in submitted/, 1 skipped")


def test_repeated_uploads_keep_the_highest_suffix(course, tmp_path):
    z = make_zip(
        tmp_path / "canvas.zip",
        [
            ("smithbob_1001_5001_backprop_ninja-2.ipynb", nb("third")),
            ("smithbob_1001_5001_backprop_ninja.ipynb", nb("first")),
            ("smithbob_1001_5001_backprop_ninja-1.ipynb", nb("second")),
        ],
    )
    result = collect_zip(course=course, zip_path=z)
    assert submitted(course, "1001") == nb("third")
    assert result.placed[0].notes == ["kept the latest of 3 notebooks, by the highest upload suffix"]
    assert reasons(result) == {
        "smithbob_1001_5001_backprop_ninja.ipynb": "older than smithbob_1001_5001_backprop_ninja-2.ipynb",
        "smithbob_1001_5001_backprop_ninja-1.ipynb": "older than smithbob_1001_5001_backprop_ninja-2.ipynb",
    }


def test_submission_id_outranks_upload_suffix(course, tmp_path):
    z = make_zip(
        tmp_path / "canvas.zip",
        [
            ("smithbob_1001_5009_backprop_ninja.ipynb", nb("newer")),
            ("smithbob_1001_5001_backprop_ninja-3.ipynb", nb("older")),
        ],
    )
    result = collect_zip(course=course, zip_path=z)
    assert submitted(course, "1001") == nb("newer")
    assert result.placed[0].notes == ["kept the latest of 2 notebooks, by the highest submission id"]


def test_moodle_folders_and_flat_names(course, tmp_path):
    old = zipfile.ZipInfo(
        "Ada Lovelace_77_assignsubmission_file_/backprop_ninja.ipynb", (2026, 1, 1, 10, 0, 0)
    )
    new = zipfile.ZipInfo(
        "Ada Lovelace_77_assignsubmission_file_/backprop_ninja (1).ipynb", (2026, 1, 2, 9, 0, 0)
    )
    z = make_zip(
        tmp_path / "moodle.zip",
        [
            (new, nb("ada new")),
            (old, nb("ada old")),
            ("Alan Turing_78_assignsubmission_file_backprop_ninja.ipynb", nb("alan")),
            ("Alan Turing_78_assignsubmission_onlinetext_/onlinetext.html", b"<p>hi</p>"),
        ],
    )
    result = collect_zip(course=course, zip_path=z)
    assert submitted(course, "77") == nb("ada new") and submitted(course, "78") == nb("alan")
    ada = next(p for p in result.placed if p.student == "77")
    assert ada.lms == "Moodle" and ada.notes == [
        "kept the latest of 2 notebooks, by the latest zip entry time"
    ]
    assert reasons(result)["Alan Turing_78_assignsubmission_onlinetext_/onlinetext.html"] == (
        "a Moodle onlinetext submission, not a file"
    )


def test_names_without_a_valid_student_id_are_skipped(course, tmp_path):
    z = make_zip(
        tmp_path / "mixed.zip",
        [
            ("smithbob_bob_5001_backprop_ninja.ipynb", nb("x")),
            ("backprop_ninja.ipynb", nb("y")),
            ("Eve_+1_assignsubmission_file_/backprop_ninja.ipynb", nb("z")),
        ],
    )
    result = collect_zip(course=course, zip_path=z)
    assert result.placed == [] and not (course / "submitted").exists()
    assert reasons(result) == {
        "smithbob_bob_5001_backprop_ninja.ipynb": f"bob {NOT_AN_ID}",
        "backprop_ninja.ipynb": "neither a Canvas nor a Moodle submission name",
        "Eve_+1_assignsubmission_file_/backprop_ninja.ipynb": f"+1 {NOT_AN_ID}",
    }


def test_traversal_absolute_and_odd_names_write_nothing_outside(course, tmp_path):
    z = make_zip(
        tmp_path / "evil.zip",
        [
            ("../../smithbob_1001_5001_backprop_ninja.ipynb", nb("a")),
            ("Eve_66_assignsubmission_file_/../../../evil.ipynb", nb("b")),
            ("/tmp/smithbob_1001_5001_backprop_ninja.ipynb", nb("c")),
            ("smithbob_1001_5001_..\\..\\backprop_ninja.ipynb", nb("d")),
            ("smithbob_1001_5001_back\x1b[2Jprop.ipynb", nb("e")),
        ],
    )
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    result = collect_zip(course=course, zip_path=z)
    assert result.placed == []
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
    assert sorted(reasons(result).values()) == [
        "a backslash in the name",
        "a path out of the folder (..)",
        "a path out of the folder (..)",
        "an absolute path",
        "control characters in the name",
    ]
    assert "\x1b" not in result.summary()  # a hostile name is shown escaped


def test_a_symlink_entry_is_refused(course, tmp_path):
    link = zipfile.ZipInfo("smithbob_1001_5001_backprop_ninja.ipynb")
    link.create_system = 3
    link.external_attr = (stat.S_IFLNK | 0o777) << 16
    z = make_zip(tmp_path / "link.zip", [(link, b"/etc/passwd")])
    result = collect_zip(course=course, zip_path=z)
    assert result.placed == [] and not (course / "submitted").exists()
    assert reasons(result) == {"smithbob_1001_5001_backprop_ninja.ipynb": "a symbolic link"}


def test_declared_size_over_the_limit_is_refused_unread(course, tmp_path):
    bomb = b"\0" * 5_000_000  # deflates to a few kB
    z = make_zip(tmp_path / "bomb.zip", [("smithbob_1001_5001_backprop_ninja.ipynb", bomb)])
    assert z.stat().st_size < 50_000
    result = collect_zip(course=course, zip_path=z, max_notebook_bytes=1_000_000)
    assert result.placed == []
    (reason,) = reasons(result).values()
    assert reason == "declared 4.8 MB, over the 1000000 bytes a notebook may have"


def test_a_zip_lying_about_its_sizes_is_refused(course, tmp_path):
    z = make_zip(tmp_path / "liar.zip", [("smithbob_1001_5001_backprop_ninja.ipynb", b"\0" * 5_000_000)])
    data = bytearray(z.read_bytes())
    for signature, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):  # uncompressed size fields
        at = data.find(signature) + offset
        data[at : at + 4] = (100).to_bytes(4, "little")
    z.write_bytes(bytes(data))
    result = collect_zip(course=course, zip_path=z, max_notebook_bytes=1_000)
    assert result.placed == [] and not (course / "submitted" / "1001" / NB).exists()
    (reason,) = reasons(result).values()
    assert reason.startswith("not extracted:") and "CRC" in reason
    assert list((course / "submitted" / "1001" / "backprop_ninja").iterdir()) == []  # no partial file left


def test_total_size_limit(course, tmp_path):
    z = make_zip(
        tmp_path / "two.zip",
        [("a_1_1_backprop_ninja.ipynb", b"1" * 600), ("b_2_2_backprop_ninja.ipynb", b"2" * 600)],
    )
    result = collect_zip(course=course, zip_path=z, max_total_bytes=1000)
    assert [p.student for p in result.placed] == ["1"]
    assert reasons(result) == {
        "b_2_2_backprop_ninja.ipynb": "not extracted: the notebooks together exceed 1000 bytes"
    }
    assert not (course / "submitted" / "2" / NB).exists()


def test_an_existing_submission_is_replaced_out_loud_or_kept(course, tmp_path):
    dest = course / "submitted" / "1001" / NB
    dest.parent.mkdir(parents=True)
    dest.write_bytes(nb("earlier"))
    z = make_zip(tmp_path / "c.zip", [("smithbob_1001_5001_backprop_ninja.ipynb", nb("now"))])
    kept = collect_zip(course=course, zip_path=z, keep_existing=True)
    assert dest.read_bytes() == nb("earlier") and kept.placed == []
    assert kept.skipped[0].reason == "student 1001 already has a submission (kept: --keep-existing)"
    replaced = collect_zip(course=course, zip_path=z)
    assert dest.read_bytes() == nb("now")
    assert replaced.placed == [Placed("1001", "smithbob_1001_5001_backprop_ninja.ipynb", "Canvas", False,
                                      ["REPLACED the notebook already there"])]  # fmt: skip
    again = collect_zip(course=course, zip_path=z)
    assert again.placed[0].notes == ["same as the notebook already there"]


def test_a_link_in_submitted_is_not_followed(course, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (course / "submitted").mkdir()
    (course / "submitted" / "1001").symlink_to(outside)
    z = make_zip(tmp_path / "c.zip", [("smithbob_1001_5001_backprop_ninja.ipynb", nb("x"))])
    result = collect_zip(course=course, zip_path=z)
    assert result.placed == [] and list(outside.iterdir()) == []
    assert result.skipped[0].reason == "submitted/1001 is a link: not followed"


def test_command_line(course, tmp_path, capsys):
    z = make_zip(tmp_path / "c.zip", [("smithbob_LATE_1001_5001_backprop_ninja.ipynb", nb("x"))])
    assert cli.main(["collect", str(course), str(z)]) == 0
    out = capsys.readouterr().out
    assert "placed   1001 <- smithbob_LATE_1001_5001_backprop_ninja.ipynb (Canvas; late)" in out
    assert submitted(course, "1001") == nb("x")
    (tmp_path / "not.zip").write_text("hello")
    assert main([str(course), str(tmp_path / "not.zip")]) == 1
    assert "could not be read as a zip" in capsys.readouterr().err
    assert main([str(tmp_path / "nowhere"), str(z)]) == 2


# ---------------------------------------------------------------- names a student chose (issue 17, point 3)
PLANTED = "x_222_assignsubmission_file_backprop_ninja-999999.ipynb"  # uploaded by 111, naming 222


def planted_reason(file: str, mark: str) -> str:
    return (
        f"REFUSED: the file name the student chose, {file}, holds {mark}: "
        "a name the student chose cannot say whose work it is"
    )


@pytest.mark.parametrize("sep", ["_", "_/"], ids=["flat", "folders"])
def test_moodle_a_classmates_marker_in_a_file_name_is_refused(course, tmp_path, sep):
    planted = f"Alice Smith_111_assignsubmission_file{sep}{PLANTED}"
    z = make_zip(
        tmp_path / "moodle.zip",
        [
            (f"Bob Brown_222_assignsubmission_file{sep}backprop_ninja.ipynb", nb("bob's own")),
            (planted, nb("alice's, for bob")),
            (f"Carol Jones_333_assignsubmission_file{sep}backprop_ninja.ipynb", nb("carol")),
        ],
    )
    result = collect_zip(course=course, zip_path=z)
    assert submitted(course, "222") == nb("bob's own") and submitted(course, "333") == nb("carol")
    assert [p.notes for p in result.placed] == [[], []]  # bob's was not "older" than anything
    assert reasons(result) == {planted: planted_reason(PLANTED, "Moodle's 'assignsubmission'")}
    assert not (course / "submitted" / "111").exists()
    assert result.summary().startswith("Moodle zip (2 of 3 entries named as Moodle names them)")
    assert f"skipped  {planted}: REFUSED" in result.summary()


def test_canvas_a_moodle_marker_places_nothing_for_its_student(course, tmp_path):
    planted = f"evealice_1003_5003_{PLANTED}"
    z = make_zip(
        tmp_path / "canvas.zip",
        [
            ("smithbob_1001_5001_backprop_ninja.ipynb", nb("bob")),
            (planted, nb("eve's, for 222")),  # 222 submitted nothing
            ("evealice_1003_5004_backprop_ninja.ipynb", nb("eve's own")),
        ],
    )
    result = collect_zip(course=course, zip_path=z)
    assert sorted(p.student for p in result.placed) == ["1001", "1003"]
    assert submitted(course, "1003") == nb("eve's own") and not (course / "submitted" / "222").exists()
    assert reasons(result) == {planted: planted_reason(PLANTED, "Moodle's 'assignsubmission'")}
    assert result.layout == "Canvas zip (2 of 3 entries named as Canvas names them)"


def test_canvas_a_second_canvas_marker_is_refused(course, tmp_path):
    planted = "evealice_1003_5003_x_1002_9999_backprop_ninja.ipynb"
    z = make_zip(
        tmp_path / "c.zip", [("smithbob_1001_5001_backprop_ninja.ipynb", nb("bob")), (planted, nb("e"))]
    )
    result = collect_zip(course=course, zip_path=z)
    assert [p.student for p in result.placed] == ["1001"]
    assert reasons(result) == {
        planted: planted_reason("x_1002_9999_backprop_ninja.ipynb", "Canvas's ids '1002_9999'")
    }


def test_planted_names_cannot_outvote_the_lms(course, tmp_path):
    """Three uploads full of Moodle markers in a Canvas zip with one honest entry: still Canvas."""
    planted = [f"evealice_1003_500{k}_x_1001_assignsubmission_file_backprop_ninja.ipynb" for k in range(3)]
    z = make_zip(
        tmp_path / "c.zip",
        [("smithbob_1001_5001_backprop_ninja.ipynb", nb("bob"))] + [(p, nb("eve")) for p in planted],
    )
    result = collect_zip(course=course, zip_path=z)
    assert result.layout == "Canvas zip (1 of 4 entries named as Canvas names them)"
    assert [(p.student, p.entry) for p in result.placed] == [
        ("1001", "smithbob_1001_5001_backprop_ninja.ipynb")
    ]
    assert submitted(course, "1001") == nb("bob")
    assert sorted(reasons(result)) == sorted(planted) and all(
        r.startswith("REFUSED") for r in reasons(result).values()
    )


def test_moodle_a_second_marker_before_the_file_is_refused(course, tmp_path):
    """A full name the student could edit, holding a marker: the folder has two."""
    forged = "x_222_assignsubmission_file_ y_111_assignsubmission_file_/backprop_ninja.ipynb"
    honest = "Odd_5_111_assignsubmission_file_/backprop_ninja.ipynb"  # a Canvas-like full name, harmless here
    z = make_zip(
        tmp_path / "m.zip",
        [(forged, nb("forged")), (honest, nb("odd")), ("Bob_222_assignsubmission_file_/b.ipynb", nb("bob"))],
    )
    result = collect_zip(course=course, zip_path=z)
    assert submitted(course, "222") == nb("bob") and submitted(course, "111") == nb("odd")
    why = "REFUSED: two Moodle markers in the participant's folder name: whose work it is cannot be told"
    assert reasons(result) == {forged: why}


def test_a_zip_of_both_lms_is_refused_whole(course, tmp_path):
    z = make_zip(
        tmp_path / "mixed.zip",
        [
            ("smithbob_1001_5001_backprop_ninja.ipynb", nb("bob")),
            ("Ada Lovelace_77_assignsubmission_file_/backprop_ninja.ipynb", nb("ada")),
        ],
    )
    result = collect_zip(course=course, zip_path=z)
    assert result.placed == [] and not (course / "submitted").exists()
    why = "this zip holds both Canvas (1) and Moodle (1) names: collect one LMS's zip at a time"
    assert set(reasons(result).values()) == {why}
    assert result.summary().startswith("which LMS made this zip cannot be told: it holds both")


def test_an_entry_of_the_other_lms_is_refused(course, tmp_path):
    """In a Canvas zip, a Moodle-shaped entry (or the reverse) is not read as the other's."""
    z = make_zip(
        tmp_path / "c.zip",
        [
            ("smithbob_1001_5001_backprop_ninja.ipynb", nb("bob")),
            ("joneseve_1002_5002_backprop_ninja.ipynb", nb("eve")),
            ("Ada Lovelace_77_assignsubmission_file_backprop_ninja.ipynb", nb("ada")),
        ],
    )
    result = collect_zip(course=course, zip_path=z)
    assert result.layout.startswith("which LMS") and result.placed == []  # votes for both: refused whole
    z = make_zip(
        tmp_path / "c2.zip",
        [("smithbob_1001_5001_backprop_ninja.ipynb", nb("bob")), ("backprop_ninja.ipynb", nb("?"))],
    )
    result = collect_zip(course=course, zip_path=z)
    assert [p.student for p in result.placed] == ["1001"]
    assert reasons(result) == {"backprop_ninja.ipynb": "not a Canvas submission name (this zip is Canvas's)"}


# ---------------------------------------------------------------- what the LMS exports need (issue 20)
def learned_rows(course: Path) -> list[list[str]]:
    return [line.split(",") for line in (course / LEARNED).read_text().splitlines()]


def test_whose_ids_and_names_are_recorded_for_the_lms_exports(course, tmp_path):
    z = make_zip(
        tmp_path / "canvas.zip",
        [
            ("smithbob_1001_5001_backprop_ninja.ipynb", nb("bob")),
            ("joneseve_LATE_1002_5002_backprop_ninja.ipynb", nb("eve")),
        ],
    )
    result = collect_zip(course=course, zip_path=z)
    assert learned_rows(course) == [
        ["student_id", "lms", "name"],
        ["1001", "Canvas", "smithbob"],
        ["1002", "Canvas", "joneseve"],
    ]
    assert "2 students' Canvas ids and names recorded in submitted/lms_students.csv" in result.summary()
    # a later zip replaces its own students' rows and keeps the others
    z = make_zip(tmp_path / "again.zip", [("smithrob_1001_5009_backprop_ninja.ipynb", nb("bob 2"))])
    collect_zip(course=course, zip_path=z)
    assert read_learned(course) == {
        "1001": Learned("1001", "Canvas", "smithrob"),
        "1002": Learned("1002", "Canvas", "joneseve"),
    }


def test_moodle_names_and_blind_marking(course, tmp_path):
    z = make_zip(
        tmp_path / "moodle.zip",
        [
            ("Ada Lovelace_7701_assignsubmission_file_/backprop_ninja.ipynb", nb("ada")),
            ("Participant_7702_assignsubmission_file_/backprop_ninja.ipynb", nb("blind")),
        ],
    )
    collect_zip(course=course, zip_path=z)
    assert read_learned(course) == {
        "7701": Learned("7701", "Moodle", "Ada Lovelace"),
        "7702": Learned("7702", "Moodle", ""),  # blind marking: Moodle wrote no name
    }


def test_the_record_replaces_a_link_and_skips_rows_it_cannot_read(course, tmp_path):
    outside = tmp_path / "outside.csv"
    outside.write_text("student_id,lms,name\n9,Canvas,planted\n")
    (course / "submitted").mkdir()
    (course / LEARNED).symlink_to(outside)
    z = make_zip(tmp_path / "c.zip", [("smithbob_1001_5001_backprop_ninja.ipynb", nb("x"))])
    collect_zip(course=course, zip_path=z)
    assert outside.read_text() == "student_id,lms,name\n9,Canvas,planted\n"
    assert not (course / LEARNED).is_symlink() and list(read_learned(course)) == ["1001"]
    (course / LEARNED).write_text("student_id,lms,name\n1001,Blackboard,x\n,Canvas,y\n1002,Moodle,Z\n")
    assert read_learned(course) == {"1002": Learned("1002", "Moodle", "Z")}
