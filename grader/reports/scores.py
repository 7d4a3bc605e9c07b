"""The grades of record: every graded cell's score of every submission, read from nbgrader's
gradebook (so PostgreSQL gradebooks work too). The table (report.py), the class report
(class_data.py) and the Gradescope run (gradescope/course.py) read them here; the CSV exports'
rows (exports.py) are these scores with what an LMS import matches on.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from nbgrader.api import Gradebook, MissingEntry

from ..exercise import spec
from ..exercise.graded import GradedExercise


@dataclass
class StudentScores:
    student: str
    by_grade_id: dict[str, float] = field(default_factory=dict)
    graded: GradedExercise = spec.NINJA  # the assignment the scores are of

    def exercise(self, ex: int) -> float:
        known = self.graded.by_grade_id
        return sum(v for k, v in self.by_grade_id.items() if known[k].exercise == ex)

    @property
    def total(self) -> float:
        return sum(self.by_grade_id.values())


def read_scores(db_url: str, exercise: GradedExercise = spec.NINJA) -> list[StudentScores]:
    """Scores of every graded cell of every submission in the gradebook (score = manual if set)."""
    out = []
    with Gradebook(db_url) as gb:
        for student in sorted(gb.students, key=lambda s: s.id):
            try:
                nb = gb.find_submission_notebook(exercise.notebook, exercise.assignment, student.id)
            except MissingEntry:
                continue
            scores = StudentScores(student.id, graded=exercise)
            for grade in nb.grades:
                if grade.name in exercise.by_grade_id:
                    scores.by_grade_id[grade.name] = float(grade.score or 0.0)
            out.append(scores)
    return out
