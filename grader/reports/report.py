"""The TA's table: per student, points per exercise and in total, from the gradebook (scores.py).

`backprop-ninja report [COURSE] [--roster FILE] [--canvas-assignment-id ID] [--canvas-id-column COLUMN]
[--moodle-id-column FIELD]` prints it, then writes the class report (reports/class.html and its
PNGs, class_report.py) and the CSV exports (exports/gradients.csv, canvas.csv, moodle.csv;
exports.py), and says what an LMS import of them needs; who each student is in the LMS: roster.py.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nbgrader.api import Gradebook

from ..exercise import spec
from ..exercise.graded import GradedExercise
from ..incoming.lms_names import read_learned
from ..preprocessors.scope import NotAnExercise, required_exercise
from ..settings import db_url
from . import class_report, exports
from .roster import CANVAS_IDS, MOODLE_IDS, Directory, RosterError, read_roster
from .scores import StudentScores, read_scores


def table(rows: list[StudentScores], exercise: GradedExercise = spec.NINJA) -> str:
    exs = exercise.exercises
    head = (
        ["student"]
        + [f"ex{e} /{exercise.exercise_points(e):g}" for e in exs]
        + [f"total /{exercise.total_points():g}"]
    )
    body = [[r.student] + [f"{r.exercise(e):g}" for e in exs] + [f"{r.total:g}"] for r in rows]
    widths = [max(len(x) for x in col) for col in zip(head, *body)]
    fmt = lambda cells: "  ".join(
        c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))
    )
    return "\n".join([fmt(head), fmt(["-" * w for w in widths])] + [fmt(b) for b in body])


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="backprop-ninja report", description=__doc__.splitlines()[0])
    ap.add_argument("course", nargs="?", default=".")
    ap.add_argument(
        "--assignment",
        default=spec.ASSIGNMENT,
        help="%(default)s, or one written by `backprop-ninja new`: its table and CSVs in exports/NAME/",
    )
    ap.add_argument(
        "--roster",
        type=Path,
        help="a CSV the LMS exported, for the students' names and LMS ids: Moodle's grading worksheet "
        "or grade export, Canvas's gradebook export (grader/reports/roster.py)",
    )
    ap.add_argument("--canvas-assignment-id", help="Canvas's id of the assignment (else a new one)")
    ap.add_argument(
        "--canvas-id-column",
        default="ID",
        choices=CANVAS_IDS,
        help="the Canvas column your ids are, when not from a zip nor in the roster (default: %(default)s)",
    )
    ap.add_argument(
        "--moodle-id-column",
        default="ID number",
        choices=list(MOODLE_IDS),
        help="the Moodle field your ids are, when not from a zip nor in the roster (default: %(default)s)",
    )
    return ap


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    course = Path(args.course).resolve()
    try:
        roster = read_roster(args.roster) if args.roster else None
    except RosterError as e:
        print(e, file=sys.stderr)
        return 2
    try:
        exercise = required_exercise(course, args.assignment)
    except NotAnExercise as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    people = Directory(roster, read_learned(course), args.canvas_id_column, args.moodle_id_column)
    print(table(read_scores(db_url(course), exercise), exercise))
    ninja = exercise is spec.NINJA
    with Gradebook(db_url(course)) as gb:
        students = sorted(s.id for s in gb.students)
        written = exports.write_all(
            gb,
            course / "exports" / ("" if ninja else exercise.assignment),
            assignment_id=args.canvas_assignment_id,
            people=people,
            exercise=exercise,
        )
    paths = written.paths + [class_report.write(course, exercise)]
    print("\nwrote " + ", ".join(str(p.relative_to(course)) for p in paths))
    for line in people.summary(students) + written.notes:
        print(line)
    return 0
