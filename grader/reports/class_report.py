"""The class report: reports/class.html, one self-contained page for the TA (run by
`backprop-ninja report COURSE`).

What the page shows is class_data.py's ClassData (the gradebook's grades, the replay records,
the suspicious list, the batch's log); its figures are drawn here (plots.py) and also saved as
PNGs in reports/; class_html.py turns both into the page.
"""

from __future__ import annotations

from pathlib import Path

from ..exercise import spec
from ..settings import report_dir
from . import plots
from .class_data import EXERCISES, GRADE_IDS, ClassData, load
from .class_html import render


def figures(data: ClassData, folder: Path) -> dict[str, bytes]:
    """The three figures, saved as folder/<name>.png; their bytes, for embedding."""
    dist = {f"ex{e}": [s.exercise(e) for s in data.scores] for e in EXERCISES}
    dist["total"] = [s.total for s in data.scores]
    maxima = {f"ex{e}": spec.exercise_points(e) for e in EXERCISES} | {"total": spec.total_points()}
    fractions = [
        [s.by_grade_id.get(gid, 0.0) / spec.BY_GRADE_ID[gid].points for gid in GRADE_IDS] for s in data.scores
    ]
    made = {
        "scores": plots.score_distribution(dist, maxima),
        "pass_rates": plots.pass_rates(data.pass_rates()),
        "heat_map": plots.heat_map([s.student for s in data.scores], GRADE_IDS, fractions),
    }
    return {name: plots.save(fig, folder / f"class_{name}.png") for name, fig in made.items()}


def write(course: Path) -> Path:
    """reports/class.html and reports/class_*.png for the course's gradebook and records."""
    data = load(course)
    folder = report_dir(course)
    images = figures(data, folder)
    out = folder / "class.html"
    out.write_text(render(data, images), encoding="utf-8")
    return out
