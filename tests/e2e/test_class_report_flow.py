"""End to end with real nbgrader: the demo class is autograded, then `backprop-ninja report`
writes the class report and the CSV exports from the gradebook, and
`nbgrader export --exporter=grader.reports.exports.GradientsExportPlugin` writes the same gradients.csv."""

from __future__ import annotations

import csv
import html

import pytest

from grader.exercise import spec
from grader.reference.backprop_ninja.samples import DEMO
from grader.reports.class_html import anchor
from grader.reports.scores import read_scores

from conftest import copy_course, nbgrader

GRADE_IDS = [g.grade_id for g in spec.GRADED]


@pytest.fixture(scope="module")
def reported_course(tmp_path_factory, graded_demo):
    """The demo class graded, then `backprop-ninja report` on it (conftest's graded_demo,
    shared with other modules: a copy of our own, as a test writes into it) and what it printed."""
    return copy_course(graded_demo.course, tmp_path_factory.mktemp("class_report")), graded_demo.report_stdout


def _rows(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


def test_the_table_is_printed_as_before(reported_course):
    _, out = reported_course
    assert out.splitlines()[2].split() == ["alice", "26", "2", "2", "8", "38"]
    assert "wrote exports/gradients.csv, exports/canvas.csv, exports/moodle.csv, reports/class.html" in out


def test_gradients_csv_equals_the_gradebook(reported_course):
    course, _ = reported_course
    rows = _rows(course / "exports" / "gradients.csv")
    assert rows[0] == ["student_id", *GRADE_IDS, "ex1", "ex2", "ex3", "ex4", "total"]
    scores = {s.student: s for s in read_scores(f"sqlite:///{course / 'gradebook.db'}")}
    assert [r[0] for r in rows[1:]] == sorted(s.student for s in DEMO)
    for row in rows[1:]:
        s = scores[row[0]]
        assert [float(v) for v in row[1:37]] == [s.by_grade_id[g] for g in GRADE_IDS], row[0]
        assert [float(v) for v in row[37:]] == [s.exercise(e) for e in (1, 2, 3, 4)] + [s.total]


def test_the_export_plugin_writes_the_same_rows(reported_course):
    course, _ = reported_course
    nbgrader(course, "export", "--exporter=grader.reports.exports.GradientsExportPlugin", "--to", "out.csv")
    assert _rows(course / "out.csv") == _rows(course / "exports" / "gradients.csv")


def test_lms_totals(reported_course):
    course, _ = reported_course
    totals = {s.student: s.total for s in read_scores(f"sqlite:///{course / 'gradebook.db'}")}
    canvas = _rows(course / "exports" / "canvas.csv")
    assert canvas[1][-1] == f"{spec.total_points():g}"
    assert {r[1]: float(r[-1]) for r in canvas[2:]} == totals
    assert {r[0]: float(r[-1]) for r in _rows(course / "exports" / "moodle.csv")[1:]} == totals


def test_class_html_shows_the_class(reported_course):
    course, _ = reported_course
    page = (course / "reports" / "class.html").read_text(encoding="utf-8")
    for section in ("summary", "pass-rates", "mistakes", "suspicious", "batch", "students"):
        assert f"id='{section}'" in page, section
    assert page.count("data:image/png;base64,") == 3
    for name in ("scores", "pass_rates", "heat_map"):
        assert (course / "reports" / f"class_{name}.png").read_bytes().startswith(b"\x89PNG")
    for sample in DEMO:
        assert f"<section id='{anchor(sample.student)}'>" in page
    mistakes = page.split("id='mistakes'")[1].split("</table>")[0]
    # the demo's mistakes, each linked to the student who made it
    for gid, hint, student in [
        ("ex1_dbndiff2", "Bessel", "bob"),
        ("ex1_dcounts", "+=", "carol"),
        ("ex1_dW2", "transposed", "dave"),
    ]:
        row = mistakes.split(f"<tr><td>{gid}</td>")[1].split("</tr>")[0]
        assert html.escape(hint) in row and f'href="#{anchor(student)}"' in row, gid
    assert "NotImplementedError" in mistakes  # erin's stubs
