"""The TA's table: per student, points per exercise and in total, from the gradebook (scores.py).

`backprop-ninja report [COURSE] [--canvas-assignment-id ID] [--canvas-id-column COLUMN]`
prints it, then writes the class report (reports/class.html and its PNGs, class_report.py)
and the CSV exports (exports/gradients.csv, canvas.csv, moodle.csv; exports.py).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from nbgrader.api import Gradebook

from ..exercise import spec
from ..settings import db_url
from . import class_report, exports
from .scores import StudentScores, read_scores


def table(rows: list[StudentScores]) -> str:
    exs = (1, 2, 3, 4)
    head = (
        ["student"]
        + [f"ex{e} /{spec.exercise_points(e):g}" for e in exs]
        + [f"total /{spec.total_points():g}"]
    )
    body = [[r.student] + [f"{r.exercise(e):g}" for e in exs] + [f"{r.total:g}"] for r in rows]
    widths = [max(len(x) for x in col) for col in zip(head, *body)]
    fmt = lambda cells: "  ".join(
        c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))
    )
    return "\n".join([fmt(head), fmt(["-" * w for w in widths])] + [fmt(b) for b in body])


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="backprop-ninja report", description=__doc__.splitlines()[0])
    ap.add_argument("course", nargs="?", default=".")
    ap.add_argument("--canvas-assignment-id", help="Canvas's id of the assignment (else a new one)")
    ap.add_argument("--canvas-id-column", default="ID", choices=exports.CANVAS_IDS)
    args = ap.parse_args(argv)
    course = Path(args.course).resolve()
    print(table(read_scores(db_url(course))))
    with Gradebook(db_url(course)) as gb:
        written = exports.write_all(
            gb,
            course / "exports",
            canvas_assignment_id=args.canvas_assignment_id,
            canvas_id_column=args.canvas_id_column,
        )
    written.append(class_report.write(course))
    print("\nwrote " + ", ".join(str(p.relative_to(course)) for p in written))
    return 0
