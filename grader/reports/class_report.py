"""The class report: reports/class.html, one self-contained page for the TA (run by
`backprop-ninja report COURSE`).

Grades come from the gradebook (the grades of record); hints, problems, timings and
suspicions from the replay records (reports/replay/<student>.json) and the batch's
reports/autograde.log and reports/batch.json. The figures are also saved as PNGs in
reports/. class_html.py turns this module's ClassData into the page.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from ..exercise import spec
from ..settings import db_url, report_dir
from . import plots
from .class_html import render
from .report import StudentScores, read_scores
from .suspicious import Entry, by_student, collect_findings, read_records

GRADE_IDS = [g.grade_id for g in spec.GRADED]
EXERCISES = sorted({g.exercise for g in spec.GRADED})
# a hint's numbers differ from student to student ("maxdiff 0.0673", "at line 6"): dropped to group them
_VARYING = re.compile(r"\b(maxdiff|line) [-+0-9.e]+")
_LOG_SPLIT = "\n===== nbgrader output"  # batch.py appends nbgrader's own output after this


@dataclass
class Mistake:
    """One hint of one gradient and the students who got it."""

    grade_id: str
    hint: str
    students: list[str]


@dataclass
class ClassData:
    scores: list[StudentScores]
    records: dict[str, dict] = field(default_factory=dict)  # student -> replay record
    suspicious: list[Entry] = field(default_factory=list)  # grader.reports.suspicious.collect_findings
    log: list[str] = field(default_factory=list)  # the batch's line per submission
    batch: dict = field(default_factory=dict)  # reports/batch.json

    def full_marks(self, s: StudentScores, grade_id: str) -> bool:
        return s.by_grade_id.get(grade_id, 0.0) >= spec.BY_GRADE_ID[grade_id].points

    def pass_rates(self) -> list[tuple[str, float]]:
        """Per grade id, in spec.GRADED (backward) order: the share of submissions with full points."""
        n = len(self.scores) or 1
        return [(gid, sum(self.full_marks(s, gid) for s in self.scores) / n) for gid in GRADE_IDS]

    def mistakes(self, *, top: int = 3) -> dict[str, list[Mistake]]:
        """Per grade id, its `top` most frequent hints among the students who lost points there."""
        by_hint: dict[tuple[str, str], list[str]] = defaultdict(list)
        for s in self.scores:
            verdicts = self.records.get(s.student, {}).get("verdicts", {})
            for gid in GRADE_IDS:
                hint = (verdicts.get(gid) or {}).get("hint")
                if hint and not self.full_marks(s, gid):
                    by_hint[gid, _VARYING.sub(r"\1 ...", hint)].append(s.student)
        out: dict[str, list[Mistake]] = {}
        for (gid, hint), students in by_hint.items():
            out.setdefault(gid, []).append(Mistake(gid, hint, students))
        for gid in out:
            out[gid] = sorted(out[gid], key=lambda m: (-len(m.students), m.hint))[:top]
        return {gid: out[gid] for gid in GRADE_IDS if gid in out}

    def suspicious_students(self) -> dict[str, list[Entry]]:
        return by_student(self.suspicious)


def load(course: Path) -> ClassData:
    """Everything the report shows; a record or log that is missing is simply not shown."""
    reports = report_dir(course)
    data = ClassData(read_scores(db_url(course)), records=read_records(course))
    data.suspicious = collect_findings(course, records=data.records)
    log = reports / "autograde.log"
    if log.is_file():
        data.log = log.read_text(errors="replace").split(_LOG_SPLIT, 1)[0].splitlines()
    if (reports / "batch.json").is_file():
        try:
            data.batch = json.loads((reports / "batch.json").read_text())
        except ValueError:
            pass
    return data


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
