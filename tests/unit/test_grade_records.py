"""tests/grade_records.py, the before/after comparison of a refactor's grades: it sees a changed
hint or flag, and not a changed run time."""

from __future__ import annotations

import json

import grade_records


def _record(tmp_path, course: str, student: str, **fields):
    folder = tmp_path / course / "reports" / "replay"
    folder.mkdir(parents=True, exist_ok=True)
    base = {
        "student": student,
        "score": 38.0,
        "replay_seconds": 1.5,
        "problems": ["run main: timed out after 3 s"],
    }
    (folder / f"{student}.json").write_text(json.dumps({**base, **fields}))


def test_cpu_seconds_in_a_flag_are_not_differences(tmp_path):
    flag = {"kind": "tampering", "evidence": "1.4 CPU s of run main not in its own count", "grade_ids": []}
    _record(tmp_path / "a", "hostile0", "h36", flags=[flag])
    _record(
        tmp_path / "b",
        "hostile0",
        "h36",
        flags=[dict(flag, evidence="1.3 CPU s of run main not in its own count")],
    )
    assert (
        grade_records.compare(grade_records.snapshot(tmp_path / "a"), grade_records.snapshot(tmp_path / "b"))
        == []
    )


def test_run_times_are_not_differences_and_hints_are(tmp_path):
    _record(tmp_path / "a", "hostile0", "h1", verdicts={"ex1_dC": {"hint": "x"}})
    _record(
        tmp_path / "b",
        "hostile0",
        "h1",
        verdicts={"ex1_dC": {"hint": "x"}},
        replay_seconds=9.0,
        problems=["run main: timed out after 4.5 s"],
    )
    a, b = grade_records.snapshot(tmp_path / "a"), grade_records.snapshot(tmp_path / "b")
    assert list(a) == ["hostile0/h1"] and grade_records.compare(a, b) == []
    _record(tmp_path / "b", "hostile0", "h1", verdicts={"ex1_dC": {"hint": "y"}})
    _record(tmp_path / "b", "hostile0", "h2")
    diffs = grade_records.compare(a, grade_records.snapshot(tmp_path / "b"))
    assert diffs[0] == "only in B: hostile0/h2" and "verdicts" in diffs[1] and len(diffs) == 2


def test_an_xdist_workers_folder_is_not_part_of_a_courses_name(tmp_path):
    _record(tmp_path / "serial", "corpus0", "s01")
    _record(tmp_path / "parallel", "popen-gw1/corpus0", "s01")
    a, b = grade_records.snapshot(tmp_path / "serial"), grade_records.snapshot(tmp_path / "parallel")
    assert list(b) == ["corpus0/s01"] and grade_records.compare(a, b) == []
