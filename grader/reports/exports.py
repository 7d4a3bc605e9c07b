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
  Canvas matches a row to a user by ID, then SIS User ID or SIS Login ID, then by the name in
  "Student". "Student" holds the student's name where it is known (the roster, the gradebook's
  "Last, First", or the name the LMS wrote in the submissions zip; roster.py), never the id,
  else nothing. The ids are the roster's Canvas row; else a Canvas user id from a Canvas zip
  goes in "ID", and a course's own id in "ID" or the SIS column `canvas_id_column` names; a
  Moodle participant id goes nowhere. The assignment column is "Backprop Ninja (<assignment
  id>)" with Canvas's assignment id, which updates that assignment, or "Backprop Ninja" without
  one, which creates a new assignment. A "Points Possible" row, as in Canvas's export, gives the
  maximum score.
- moodle.csv: Moodle's "Import grades > CSV file" layout: identifier columns, then one grade
  column ("Backprop Ninja") that the import form maps to a grade item. The import maps one
  column to the user (by ID number, email, username or user id), and a row whose cell there is
  empty is not skipped safely (Moodle's importer then credits the user of the row before), so
  every row has the identifier that most students have, and the file holds only the identifier
  columns every row fills, in the order "ID number", "Email address", "Username", "User id".
  They come from the roster, the gradebook's email, or a course's own id taken as
  `moodle_id_column`; a Moodle participant id is none of them. The students without it are left
  out and listed, with what to pass; with no student to write, there is no moodle.csv.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.plugins import ExportPlugin
from traitlets import Unicode

from ..exercise import spec
from ..exercise.graded import GradedExercise
from ..incoming.lms_names import read_learned
from .roster import CANVAS_IDS, MOODLE_IDS, Directory, Identity, listed, n_students, read_roster
from .scores import StudentScores

TITLE = "Backprop Ninja"  # the assignment's name in the LMS
ROSTER_HINT = (
    "pass --roster FILE, a CSV Moodle exports: the assignment's grading worksheet (View all submissions > "
    "Download grading worksheet: it carries the zip's participant ids) or the grade export "
    "(Export > Plain text file) with ID number or Email address"
)


@dataclass
class GradebookRow(StudentScores):
    """One student of the gradebook, with what an LMS import matches on; by_grade_id is empty
    without a submission."""

    first_name: str = ""
    last_name: str = ""
    email: str = ""


def gradebook_rows(
    gb: Gradebook, *, students: list[str] = (), exercise: GradedExercise = spec.NINJA
) -> list[GradebookRow]:
    """Every student of the gradebook (or those named), sorted by id; score = manual if set."""
    out = []
    for student in sorted(gb.students, key=lambda s: s.id):
        if students and student.id not in students:
            continue
        row = GradebookRow(
            student.id,
            graded=exercise,
            first_name=student.first_name or "",
            last_name=student.last_name or "",
            email=student.email or "",
        )
        try:
            nb = gb.find_submission_notebook(exercise.notebook, exercise.assignment, student.id)
        except MissingEntry:
            out.append(row)
            continue
        row.by_grade_id = {g.name: float(g.score or 0.0) for g in nb.grades if g.name in exercise.by_grade_id}
        out.append(row)
    return out


def _num(value: float) -> str:
    return f"{value:g}"


def gradients_table(rows: list[GradebookRow], exercise: GradedExercise = spec.NINJA) -> list[list[str]]:
    """gradients.csv's header and rows."""
    grade_ids, exercises = [g.grade_id for g in exercise.graded], exercise.exercises
    head = ["student_id"] + grade_ids + [f"ex{e}" for e in exercises] + ["total"]
    body = [
        [r.student]
        + [_num(r.by_grade_id[g]) if g in r.by_grade_id else "" for g in grade_ids]
        + [_num(r.exercise(e)) for e in exercises]
        + [_num(r.total)]
        for r in rows
    ]
    return [head] + body


def _identities(rows: list[GradebookRow], people: Directory) -> dict[str, Identity]:
    name = lambda r: ", ".join(p for p in (r.last_name, r.first_name) if p)
    return {r.student: people.identify(r.student, gradebook_name=name(r), email=r.email) for r in rows}


def title(exercise: GradedExercise) -> str:
    """The assignment's name in the LMS."""
    return TITLE if exercise is spec.NINJA else (exercise.definition.title or exercise.assignment)


def canvas_table(
    rows: list[GradebookRow],
    *,
    assignment_id: str | None = None,
    people: Directory | None = None,
    exercise: GradedExercise = spec.NINJA,
) -> list[list[str]]:
    who = _identities(rows, people or Directory())
    column = f"{title(exercise)} ({assignment_id})" if assignment_id else title(exercise)
    head = ["Student"] + CANVAS_IDS + ["Section", column]
    points = ["Points Possible"] + [""] * (len(CANVAS_IDS) + 1) + [_num(exercise.total_points())]
    body = []
    for r in rows:
        me = who[r.student]
        ids = [me.canvas.get(c, "") for c in CANVAS_IDS]
        body.append([me.name] + ids + [me.section, _num(r.total)])
    return [head, points] + body


@dataclass
class MoodleExport:
    table: list[list[str]] | None  # None: no student has an identifier Moodle can match
    identifier: str = ""  # the column to map to the user
    rows: list[Identity] = field(default_factory=list)  # the students written
    left_out: dict[str, list[Identity]] = field(default_factory=dict)  # why -> students

    def notes(self) -> list[str]:
        if self.table is None:
            lines = ["moodle.csv not written: no student has an identifier Moodle's import matches"]
        else:
            how = f"map '{self.identifier}' to {MOODLE_IDS[self.identifier]}"
            lines = [f"moodle.csv: {n_students(len(self.rows))}; Import grades > CSV file: {how}"]
            assumed = [me for me in self.rows if me.assumed == self.identifier]
            if assumed:
                lines[0] += (
                    f" ({len(assumed)} of them by their student ids, taken as Moodle's {self.identifier}: "
                    "else --moodle-id-column or --roster)"
                )
        lines += [f"moodle.csv leaves out {listed(who)}: {why}" for why, who in self.left_out.items()]
        if self.left_out:
            own = any(not me.id_is for who in self.left_out.values() for me in who)
            lines.append(f"moodle.csv: {ROSTER_HINT}" + ("; or --moodle-id-column" if own else ""))
        return lines


def moodle_export(
    rows: list[GradebookRow], people: Directory | None = None, exercise: GradedExercise = spec.NINJA
) -> MoodleExport:
    who = _identities(rows, people or Directory())
    have = {f: [r for r in rows if f in who[r.student].moodle] for f in MOODLE_IDS}
    # the most used; on a tie, the one the LMS said more often than the course assumed, then the first
    said = lambda f: sum(who[r.student].assumed != f for r in have[f])
    identifier = max(MOODLE_IDS, key=lambda f: (len(have[f]), said(f)))
    written = have[identifier]
    left_out: dict[str, list[Identity]] = {}
    for me in who.values():
        if identifier not in me.moodle:
            left_out.setdefault(me.why_not(identifier), []).append(me)
    if not written:
        return MoodleExport(None, left_out=left_out)
    columns = [f for f in MOODLE_IDS if all(f in who[r.student].moodle for r in written)]
    body = [[who[r.student].moodle[c] for c in columns] + [_num(r.total)] for r in written]
    mine = [who[r.student] for r in written]
    return MoodleExport([columns + [title(exercise)]] + body, identifier, mine, left_out)


def canvas_notes(rows: list[GradebookRow], people: Directory | None = None) -> list[str]:
    who = _identities(rows, people or Directory())
    no_id = [me for me in who.values() if not me.canvas]
    if not no_id:
        return []
    return [
        f"canvas.csv: no Canvas id for {listed(no_id)}: Canvas matches them by the name in 'Student', "
        "or lists them as unknown students; --roster with Canvas's gradebook export gives their ids"
    ]


def write_csv(table: list[list[str]], path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows(table)
    return path


@dataclass
class Written:
    paths: list[Path]
    notes: list[str]  # what the TA must know to import them


def write_all(
    gb: Gradebook,
    folder: Path,
    *,
    assignment_id: str | None = None,
    people: Directory | None = None,
    exercise: GradedExercise = spec.NINJA,
) -> Written:
    """gradients.csv, canvas.csv and moodle.csv in `folder` (the course's exports/)."""
    rows = gradebook_rows(gb, exercise=exercise)
    people = people or Directory()
    canvas = canvas_table(rows, assignment_id=assignment_id, people=people, exercise=exercise)
    paths = [
        write_csv(gradients_table(rows, exercise), folder / "gradients.csv"),
        write_csv(canvas, folder / "canvas.csv"),
    ]
    moodle = moodle_export(rows, people, exercise)
    notes = canvas_notes(rows, people) + moodle.notes()
    if moodle.table is not None:
        paths.append(write_csv(moodle.table, folder / "moodle.csv"))
    elif (folder / "moodle.csv").exists():
        (folder / "moodle.csv").unlink()  # an older one would import a stale mapping
        notes.append("moodle.csv: the older exports/moodle.csv removed (it would import stale grades)")
    return Written(paths, notes)


class GradientsExportPlugin(ExportPlugin):
    """gradients.csv from `nbgrader export` (or the formgrader): --to FILE, default gradients.csv;
    --ExportPlugin.student=[...] keeps those students only."""

    default_name = "gradients.csv"

    def tables(self, rows: list[GradebookRow]) -> tuple[list[list[str]] | None, list[str]]:
        """The table (None: nothing to write) and what to log."""
        return gradients_table(rows), []

    def export(self, gradebook: Gradebook) -> None:
        dest = self.to or self.default_name
        if self.assignment and spec.ASSIGNMENT not in [str(a) for a in self.assignment]:
            self.log.warning("only %s is exported by %s", spec.ASSIGNMENT, type(self).__name__)
        rows = gradebook_rows(gradebook, students=[str(s) for s in self.student])
        table, notes = self.tables(rows)
        for note in notes:
            self.log.warning("%s", note)
        if table is not None:
            self.log.info("Exporting %d students' grades to %s", len(table) - 1, dest)
            write_csv(table, Path(dest))


class _LmsExportPlugin(GradientsExportPlugin):
    roster = Unicode(
        "", help="a CSV the LMS exported, with the students' LMS ids (grader/reports/roster.py)"
    ).tag(config=True)

    def people(self) -> Directory:
        """The roster and what `backprop-ninja collect` learned (in the course nbgrader runs in)."""
        coursedir = getattr(self.parent, "coursedir", None)
        course = Path(coursedir.root) if coursedir is not None else Path.cwd()
        return Directory(read_roster(Path(self.roster)) if self.roster else None, read_learned(course))


class CanvasExportPlugin(_LmsExportPlugin):
    """canvas.csv from `nbgrader export --exporter=grader.reports.exports.CanvasExportPlugin`."""

    default_name = "canvas.csv"

    def tables(self, rows: list[GradebookRow]) -> tuple[list[list[str]] | None, list[str]]:
        return canvas_table(rows, people=self.people()), []


class MoodleExportPlugin(_LmsExportPlugin):
    """moodle.csv from `nbgrader export --exporter=grader.reports.exports.MoodleExportPlugin`
    (`--MoodleExportPlugin.roster=FILE`: see roster.py)."""

    default_name = "moodle.csv"

    def tables(self, rows: list[GradebookRow]) -> tuple[list[list[str]] | None, list[str]]:
        moodle = moodle_export(rows, self.people())
        return moodle.table, moodle.notes()
