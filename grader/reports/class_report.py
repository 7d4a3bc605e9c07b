"""The class report: reports/class.html, one self-contained page for the TA (run by
`backprop-ninja report COURSE`).

What the page shows is class_data.py's ClassData (the gradebook's grades, the replay records,
the suspicious list, the batch's log); its figures are drawn here (plots.py) and also saved as
PNGs in reports/; class_html.py turns both into the page.
"""

from __future__ import annotations

from pathlib import Path

from ..exercise import spec
from ..exercise.graded import GradedExercise
from ..settings import report_dir
from . import plots
from .class_data import ClassData, load
from .class_html import render


def figures(data: ClassData, folder: Path, prefix: str = "class") -> dict[str, bytes]:
    """The three figures, saved as folder/<prefix>_<name>.png; their bytes, for embedding."""
    ex = data.exercise
    dist = {f"ex{e}": [s.exercise(e) for s in data.scores] for e in ex.exercises}
    dist["total"] = [s.total for s in data.scores]
    maxima = {f"ex{e}": ex.exercise_points(e) for e in ex.exercises} | {"total": ex.total_points()}
    points = ex.by_grade_id
    fractions = [
        [s.by_grade_id.get(gid, 0.0) / points[gid].points for gid in data.grade_ids] for s in data.scores
    ]
    made = {
        "scores": plots.score_distribution(dist, maxima),
        "pass_rates": plots.pass_rates(data.pass_rates(), {gid: g.exercise for gid, g in points.items()}),
        "heat_map": plots.heat_map([s.student for s in data.scores], data.grade_ids, fractions),
    }
    return {name: plots.save(fig, folder / f"{prefix}_{name}.png") for name, fig in made.items()}


def write(course: Path, exercise: GradedExercise = spec.NINJA) -> Path:
    """reports/class.html and reports/class_*.png for the course's gradebook and records (another
    exercise's: reports/class-NAME.html and class-NAME_*.png)."""
    data = load(course, exercise)
    folder = report_dir(course)
    prefix = "class" if exercise is spec.NINJA else f"class-{exercise.assignment}"
    images = figures(data, folder, prefix)
    out = folder / f"{prefix}.html"
    out.write_text(render(data, images), encoding="utf-8")
    return out
