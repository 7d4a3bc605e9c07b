"""What the class report shows, gathered in one ClassData: grades from the gradebook (the
grades of record, scores.py); hints, problems, timings and suspicions from the replay records
(reports/replay/<student>.json), the suspicious list (suspicious.py), and the batch's
reports/autograde.log and reports/batch.json. class_report.py draws its figures and writes the
page; class_html.py is the page's markup.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from ..exercise import spec
from ..exercise.graded import GradedExercise
from ..settings import db_url, report_dir
from .scores import StudentScores, read_scores
from .suspicious import Entry, by_student, collect_findings, read_records

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
    exercise: GradedExercise = spec.NINJA  # the assignment the page is of

    @property
    def grade_ids(self) -> list[str]:
        return [g.grade_id for g in self.exercise.graded]

    def full_marks(self, s: StudentScores, grade_id: str) -> bool:
        return s.by_grade_id.get(grade_id, 0.0) >= self.exercise.by_grade_id[grade_id].points

    def pass_rates(self) -> list[tuple[str, float]]:
        """Per grade id, in the exercise's (backward) order: the share of submissions with full points."""
        n = len(self.scores) or 1
        return [(gid, sum(self.full_marks(s, gid) for s in self.scores) / n) for gid in self.grade_ids]

    def mistakes(self, *, top: int = 3) -> dict[str, list[Mistake]]:
        """Per grade id, its `top` most frequent hints among the students who lost points there."""
        by_hint: dict[tuple[str, str], list[str]] = defaultdict(list)
        for s in self.scores:
            verdicts = self.records.get(s.student, {}).get("verdicts", {})
            for gid in self.grade_ids:
                hint = (verdicts.get(gid) or {}).get("hint")
                if hint and not self.full_marks(s, gid):
                    by_hint[gid, _VARYING.sub(r"\1 ...", hint)].append(s.student)
        out: dict[str, list[Mistake]] = {}
        for (gid, hint), students in by_hint.items():
            out.setdefault(gid, []).append(Mistake(gid, hint, students))
        for gid in out:
            out[gid] = sorted(out[gid], key=lambda m: (-len(m.students), m.hint))[:top]
        return {gid: out[gid] for gid in self.grade_ids if gid in out}

    def suspicious_students(self) -> dict[str, list[Entry]]:
        return by_student(self.suspicious)


def load(course: Path, exercise: GradedExercise = spec.NINJA) -> ClassData:
    """Everything the report shows; a record or log that is missing is simply not shown."""
    reports = report_dir(course)
    records = read_records(course, exercise.records(reports))
    data = ClassData(read_scores(db_url(course), exercise), records=records, exercise=exercise)
    data.suspicious = collect_findings(course, records=records, exercise=exercise)
    log, _, batch = exercise.batch_files(reports)
    if log.is_file():
        data.log = log.read_text(errors="replace").split(_LOG_SPLIT, 1)[0].splitlines()
    if batch.is_file():
        try:
            data.batch = json.loads(batch.read_text())
        except ValueError:
            pass
    return data
