"""The class's grades as CSV files for spreadsheets and for the LMS's gradebook import.

Written by `backprop-ninja report COURSE` under COURSE/exports/, read from the gradebook
through nbgrader's API (so PostgreSQL gradebooks work too):

- gradients.csv: `student_id`, one column per grade id in spec.GRADED order (the backward
  order), then `ex1`..`ex4` (subtotals) and `total`. A student without a submission has
  empty grade-id cells and 0 subtotals, as nbgrader's own export scores them 0. Also an
  nbgrader export plugin:
  `nbgrader export --exporter=grader.reports.exports.GradientsExportPlugin [--to FILE]`.
- canvas.csv: Canvas's Gradebook import layout, the columns its own export has:
  "Student", "ID", "SIS User ID", "SIS Login ID", "Section", then one assignment column.
  Canvas matches a row to a user by ID, SIS User ID or SIS Login ID (one is enough); the
  nbgrader student id goes in "ID" (the LMS user id; `canvas_id_column` moves it to a SIS
  column when the course's ids are SIS ids) and the others stay empty. The assignment
  column is "Backprop Ninja (<assignment id>)" with Canvas's assignment id, which updates
  that assignment, or "Backprop Ninja" without one, which creates a new assignment. A
  "Points Possible" row, as in Canvas's export, gives the maximum score.
- moodle.csv: Moodle's "Import grades > CSV file" layout: an identifier column
  ("ID number", the nbgrader student id, mapped to the user's ID number on import;
  "Email address" too, from the gradebook, when the course identifies users by email),
  then one grade column ("Backprop Ninja") that the import form maps to a grade item.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.plugins import ExportPlugin

from ..exercise import spec
from .scores import StudentScores

GRADE_IDS = [g.grade_id for g in spec.GRADED]
EXERCISES = sorted({g.exercise for g in spec.GRADED})
TITLE = "Backprop Ninja"  # the assignment's name in the LMS
CANVAS_IDS = ["ID", "SIS User ID", "SIS Login ID"]


@dataclass
class GradebookRow(StudentScores):
    """One student of the gradebook, with what an LMS import matches on; by_grade_id is empty
    without a submission."""

    first_name: str = ""
    last_name: str = ""
    email: str = ""


def gradebook_rows(gb: Gradebook, *, students: list[str] = ()) -> list[GradebookRow]:
    """Every student of the gradebook (or those named), sorted by id; score = manual if set."""
    out = []
    for student in sorted(gb.students, key=lambda s: s.id):
        if students and student.id not in students:
            continue
        row = GradebookRow(
            student.id,
            first_name=student.first_name or "",
            last_name=student.last_name or "",
            email=student.email or "",
        )
        try:
            nb = gb.find_submission_notebook(spec.NOTEBOOK, spec.ASSIGNMENT, student.id)
        except MissingEntry:
            out.append(row)
            continue
        row.by_grade_id = {g.name: float(g.score or 0.0) for g in nb.grades if g.name in spec.BY_GRADE_ID}
        out.append(row)
    return out


def _num(value: float) -> str:
    return f"{value:g}"


def gradients_table(rows: list[GradebookRow]) -> list[list[str]]:
    """gradients.csv's header and rows."""
    head = ["student_id"] + GRADE_IDS + [f"ex{e}" for e in EXERCISES] + ["total"]
    body = [
        [r.student]
        + [_num(r.by_grade_id[g]) if g in r.by_grade_id else "" for g in GRADE_IDS]
        + [_num(r.exercise(e)) for e in EXERCISES]
        + [_num(r.total)]
        for r in rows
    ]
    return [head] + body


def canvas_table(
    rows: list[GradebookRow], *, assignment_id: str | None = None, id_column: str = "ID"
) -> list[list[str]]:
    if id_column not in CANVAS_IDS:
        raise ValueError(f"id_column must be one of {CANVAS_IDS}, not {id_column!r}")
    column = f"{TITLE} ({assignment_id})" if assignment_id else TITLE
    head = ["Student"] + CANVAS_IDS + ["Section", column]
    points = ["Points Possible"] + [""] * (len(CANVAS_IDS) + 1) + [_num(spec.total_points())]
    body = []
    for r in rows:
        name = ", ".join(p for p in (r.last_name, r.first_name) if p) or r.student
        ids = [r.student if c == id_column else "" for c in CANVAS_IDS]
        body.append([name] + ids + ["", _num(r.total)])
    return [head, points] + body


def moodle_table(rows: list[GradebookRow]) -> list[list[str]]:
    return [["ID number", "Email address", TITLE]] + [[r.student, r.email, _num(r.total)] for r in rows]


def write_csv(table: list[list[str]], path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows(table)
    return path


def write_all(
    gb: Gradebook, folder: Path, *, canvas_assignment_id: str | None = None, canvas_id_column: str = "ID"
) -> list[Path]:
    """gradients.csv, canvas.csv and moodle.csv in `folder` (the course's exports/)."""
    rows = gradebook_rows(gb)
    return [
        write_csv(gradients_table(rows), folder / "gradients.csv"),
        write_csv(
            canvas_table(rows, assignment_id=canvas_assignment_id, id_column=canvas_id_column),
            folder / "canvas.csv",
        ),
        write_csv(moodle_table(rows), folder / "moodle.csv"),
    ]


class GradientsExportPlugin(ExportPlugin):
    """gradients.csv from `nbgrader export` (or the formgrader): --to FILE, default gradients.csv;
    --ExportPlugin.student=[...] keeps those students only."""

    default_name = "gradients.csv"

    def table(self, rows: list[GradebookRow]) -> list[list[str]]:
        return gradients_table(rows)

    def export(self, gradebook: Gradebook) -> None:
        dest = self.to or self.default_name
        if self.assignment and spec.ASSIGNMENT not in [str(a) for a in self.assignment]:
            self.log.warning("only %s is exported by %s", spec.ASSIGNMENT, type(self).__name__)
        rows = gradebook_rows(gradebook, students=[str(s) for s in self.student])
        self.log.info("Exporting %d students' grades to %s", len(rows), dest)
        write_csv(self.table(rows), Path(dest))


class CanvasExportPlugin(GradientsExportPlugin):
    """canvas.csv from `nbgrader export --exporter=grader.reports.exports.CanvasExportPlugin`."""

    default_name = "canvas.csv"

    def table(self, rows: list[GradebookRow]) -> list[list[str]]:
        return canvas_table(rows)


class MoodleExportPlugin(GradientsExportPlugin):
    """moodle.csv from `nbgrader export --exporter=grader.reports.exports.MoodleExportPlugin`."""

    default_name = "moodle.csv"

    def table(self, rows: list[GradebookRow]) -> list[list[str]]:
        return moodle_table(rows)
