"""FeedbackSummary: the feedback a student reads opens with one row per graded cell of
grader/exercise/spec.py (gradient, grade id, points, and "right" or the one-line hint), each
linking to its cell; the hidden tests' source is replaced by a one-line note.

Enable in nbgrader_config.py, right after nbgrader's GetGrades (its scores are the
gradebook's, so the rows agree with the totals), with FeedbackExporter for the page:
`c.GenerateFeedback.preprocessors = [GetGrades, FeedbackSummary, CSSHTMLHeaderPreprocessor]`.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import asdict
from pathlib import Path

from nbconvert.exporters.exporter import ResourcesDict
from nbformat.notebooknode import NotebookNode
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import NbGraderPreprocessor
from nbgrader.utils import is_grade, is_solution
from traitlets import List

from ..exercise.cells import nbgrader_meta
from ..exercise.graded import GradedExercise
from ..reports.verdict_rows import Row, row
from ..settings import report_dir
from .scope import graded_exercise

__all__ = ["FeedbackSummary", "Row", "strip_hidden_tests", "summary_html"]

HIDDEN_BEGIN, HIDDEN_END = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
# The kit's grading call, wherever an instructor put it: the student needs none of it.
_KIT_LINE = re.compile(r"^\s*(from\s+grader\.incell\s+import\b|import\s+grader\.incell\b|grade\()")


class FeedbackSummary(NbGraderPreprocessor):
    # HTMLExporter configures NbConvertBase.display_data_priority for all it holds: unused here,
    # declared configurable (as GetGrades does) so nbgrader does not warn about it.
    display_data_priority = List(NbGraderPreprocessor.display_data_priority.default_value).tag(config=True)

    def preprocess(self, nb: NotebookNode, resources: ResourcesDict) -> tuple[NotebookNode, ResourcesDict]:
        exercise = graded_exercise(resources, self.config)
        if exercise is None:
            return nb, resources
        info = resources.get("nbgrader") or {}
        record = self._record(info.get("student", ""), exercise)
        cells = {}
        for cell in nb.cells:
            meta = nbgrader_meta(cell)
            if meta and not is_solution(cell) and cell.cell_type == "code":  # the instructor's cells
                cell.source = strip_hidden_tests(cell.source, meta.get("grade_id", ""))
            if is_grade(cell) and meta.get("grade_id") in exercise.by_grade_id:
                cells.setdefault(meta["grade_id"], cell)
        rows = [row(g, cells.get(g.grade_id), record.get(g.grade_id)) for g in exercise.graded]
        resources["feedback_summary"] = {
            "rows": [asdict(r) for r in rows],
            "html": summary_html(rows, info.get("score"), info.get("max_score"), info.get("late_penalty")),
        }
        return nb, resources

    def _record(self, student: str, exercise: GradedExercise) -> dict:
        """The replay's verdicts for this student (ReplayGrades wrote them); {} without one."""
        if not student or "/" in student or student.startswith("."):
            return {}
        path = (
            exercise.records(report_dir(Path(CourseDirectory(config=self.config).root))) / f"{student}.json"
        )
        try:
            verdicts = json.loads(path.read_text()).get("verdicts")
        except (OSError, ValueError, AttributeError):
            self.log.info("no replay record for %s: the summary reads the verdicts in the cells", student)
            return {}
        return verdicts if isinstance(verdicts, dict) else {}


def strip_hidden_tests(source: str, grade_id: str) -> str:
    """The cell without its hidden tests and the kit's grading lines; one note where they were."""
    note = f"# graded by the kit: {grade_id}" if grade_id else "# graded by the kit"
    out, hidden, noted = [], False, False
    for line in source.split("\n"):
        mark = line.strip()
        if mark == HIDDEN_BEGIN:
            hidden = True
        elif mark == HIDDEN_END:
            hidden = False
        elif not hidden and not _KIT_LINE.match(line):
            out.append(line)
            continue
        if not noted:  # an unterminated block hides the rest of the cell: nothing leaks
            out.append(note)
            noted = True
    return "\n".join(out)


def _quoted(text: str) -> str:
    """Escaped; `code` as <code> (after escaping, so a backtick cannot open a tag)."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text, quote=True))


def _points(score, max_score) -> str:
    return f"{'-' if score is None else f'{float(score):g}'} / {float(max_score):g}"


def summary_html(rows: list[Row], score=None, max_score=None, late_penalty=None) -> str:
    """The table the feedback opens with. Grade ids come from spec; everything is escaped anyway."""
    body = []
    for r in rows:
        gid = html.escape(r.grade_id, quote=True)
        name = f"<code>{html.escape(r.name)}</code>"
        link = lambda t, gid=gid, on=r.linked: f'<a href="#{gid}">{t}</a>' if on else t
        body.append(
            f'<tr class="{r.kind}" data-grade-id="{gid}"><td class="center">{r.exercise}</td>'
            f"<td>{link(name)}</td><td>{link(gid)}</td>"
            f'<td class="center">{_points(r.score, r.max_score)}</td><td>{_quoted(r.verdict)}</td></tr>'
        )
    if score in (None, ""):
        score = sum(r.score or 0.0 for r in rows)
        max_score = sum(r.max_score for r in rows)
    if late_penalty:
        body.append(
            f'<tr class="danger"><th colspan="3">Late submission penalty</th>'
            f'<td class="center">-{float(late_penalty):g}</td><td></td></tr>'
        )
    body.append(
        f'<tr><th colspan="3">Total</th><th class="center">{_points(score, max_score)}</th><th></th></tr>'
    )
    return (
        '<table class="table table-condensed" id="kit-summary">\n<thead><tr><th class="center">Exercise</th>'
        '<th>Gradient</th><th>Grade id</th><th class="center">Points</th><th>Verdict</th></tr></thead>\n'
        "<tbody>\n" + "\n".join(body) + "\n</tbody>\n</table>"
    )
