"""grader/preprocessors/feedback_summary.py and feedback_exporter.py in-process: a small graded
notebook (nbgrader metadata, the scores GetGrades adds, ReplayGrades' verdict outputs) and a
replay record; the summary's rows, links, escaping, and the hidden tests' source gone."""

from __future__ import annotations

import json
import re

import pytest
from bs4 import BeautifulSoup
from nbconvert.exporters import HTMLExporter
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output
from nbgrader.converters import GenerateFeedback
from nbgrader.coursedir import CourseDirectory
from traitlets.config import Config

from grader.exercise import spec
from grader.exercise.verdict import Verdict
from grader.preprocessors import FeedbackExporter, FeedbackSummary
from grader.preprocessors.feedback_exporter import NO_ALT
from grader.preprocessors.feedback_summary import strip_hidden_tests
from grader.preprocessors.replay_grades import verdict_outputs

STUDENT = "stu"
EVIL = '`counts_sum` <script>alert(1)</script> & "x"'
STUDENT_CODE = "dcounts = counts_sum_inv * dprobs\n# ### BEGIN HIDDEN TESTS (my note)\ngrade = 3"


def hidden_test_source(gid: str) -> str:
    return (
        f"# {gid}: checked\nassert True\n### BEGIN HIDDEN TESTS\nfrom grader.incell import grade\n"
        f'grade("{gid}", globals())\n### END HIDDEN TESTS'
    )


def graded_cell(v: Verdict, gradebook_score: float | None = None):
    cell = new_code_cell(hidden_test_source(v.grade_id), execution_count=3)
    cell.metadata["nbgrader"] = {
        "grade": True,
        "solution": False,
        "locked": True,
        "grade_id": v.grade_id,
        "points": v.max_score,
        "score": v.score if gradebook_score is None else gradebook_score,  # as GetGrades sets it
    }
    cell.outputs = verdict_outputs(v, 3)
    return cell


VERDICTS = [
    Verdict("ex1_dlogprobs", 1.0, 1.0, ["dlogprobs | exact: True"]),
    Verdict("ex1_dcounts", 0.0, 1.0, ["dcounts | exact: False", f"hint: {EVIL}"], hint=EVIL),
    Verdict(
        "ex1_dnorm_logits",
        1.0,
        1.0,
        [
            "norm_logits | exact: False",
            "your rule is right; it received a wrong `dcounts` (credit for a carried error: 1/1)",
        ],
        carried=True,
    ),
    Verdict("ex3_dhprebn", 0.0, 2.0, ["dhprebn | wrong shape (32,), expected (32, 64)"]),
]


def notebook(gradebook: dict[str, float] | None = None):
    solution = new_code_cell(STUDENT_CODE)
    solution.metadata["nbgrader"] = {"grade": False, "solution": True, "grade_id": "ex1_solution"}
    cells = [new_markdown_cell("# Backprop ninja"), solution]
    cells += [graded_cell(v, (gradebook or {}).get(v.grade_id)) for v in VERDICTS]
    return new_notebook(cells=cells)


def write_record(root, verdicts=VERDICTS):
    path = root / "reports" / "replay" / f"{STUDENT}.json"
    path.parent.mkdir(parents=True)
    record = {
        v.grade_id: {
            "score": v.score,
            "max_score": v.max_score,
            "carried": v.carried,
            "hint": v.hint,
            "lines": v.lines,
        }
        for v in verdicts
    }
    path.write_text(json.dumps({"student": STUDENT, "verdicts": record}))


def run(root, nb, **nbgrader):
    config = Config()
    config.CourseDirectory.root = str(root)
    resources = {"nbgrader": {"student": STUDENT, "assignment": spec.ASSIGNMENT, **nbgrader}}
    return FeedbackSummary(config=config).preprocess(nb, resources)


@pytest.fixture
def summary(tmp_path):
    write_record(tmp_path)
    nb, resources = run(tmp_path, notebook(), score=30.0, max_score=38.0, late_penalty=0)
    rows = {r["grade_id"]: r for r in resources["feedback_summary"]["rows"]}
    return nb, rows, resources["feedback_summary"]["html"]


def test_one_row_per_graded_cell_of_the_spec(summary):
    _, rows, html = summary
    assert list(rows) == [g.grade_id for g in spec.GRADED]
    assert [r["name"] for r in rows.values()] == [g.name for g in spec.GRADED]
    assert re.findall(r'data-grade-id="([^"]+)"', html) == [g.grade_id for g in spec.GRADED]


def test_right_wrong_and_carried_rows(summary):
    _, rows, html = summary
    assert rows["ex1_dlogprobs"]["verdict"] == "right" and rows["ex1_dlogprobs"]["score"] == 1.0
    assert rows["ex1_dcounts"]["verdict"] == " ".join(EVIL.split()) and rows["ex1_dcounts"]["score"] == 0.0
    assert "credit for a carried error: 1/1" in rows["ex1_dnorm_logits"]["verdict"]
    assert rows["ex3_dhprebn"]["verdict"] == "wrong shape (32,), expected (32, 64)"  # no hint: the line
    assert '<tr class="success" data-grade-id="ex1_dlogprobs">' in html
    assert '<tr class="info" data-grade-id="ex1_dnorm_logits">' in html  # carried: full points, a note
    assert '<tr class="danger" data-grade-id="ex1_dcounts">' in html
    assert '<td class="center">0 / 2</td>' in html


def test_rows_link_to_their_cells(summary):
    nb, rows, html = summary
    assert '<a href="#ex1_dlogprobs"><code>dlogprobs</code></a>' in html
    assert '<a href="#ex1_dlogprobs">ex1_dlogprobs</a>' in html
    # a graded cell the notebook lacks: a row without a link and without points
    assert not rows["ex1_dW1"]["linked"] and rows["ex1_dW1"]["verdict"] == "not graded"
    assert 'href="#ex1_dW1"' not in html and '<td class="center">- / 1</td>' in html


def test_student_text_is_escaped(summary):
    _, _, html = summary
    assert "<script>" not in html and "alert(1)" in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;x&quot;" in html
    assert "<code>counts_sum</code>" in html  # backticks become code, after escaping


def test_hidden_tests_are_gone_and_the_note_stays(summary):
    nb, _, _ = summary
    tests = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]
    assert len(tests) == len(VERDICTS)
    for c in tests:
        gid = c.metadata["nbgrader"]["grade_id"]
        assert c.source == f"# {gid}: checked\nassert True\n# graded by the kit: {gid}"
        assert c.outputs == verdict_outputs(next(v for v in VERDICTS if v.grade_id == gid), 3)
    assert nb.cells[1].source == STUDENT_CODE  # the student's own cells are theirs, untouched


def test_totals_come_from_nbgraders_resources(summary, tmp_path):
    _, _, html = summary
    assert re.search(r"Total</th><th[^>]*>30 / 38</th>", html)
    _, resources = run(tmp_path, notebook(), score=29.0, max_score=38.0, late_penalty=1.0)
    assert "Late submission penalty" in resources["feedback_summary"]["html"]
    assert re.search(r"Total</th><th[^>]*>29 / 38</th>", resources["feedback_summary"]["html"])


def test_without_resources_the_total_is_the_rows(tmp_path):
    _, resources = run(tmp_path, notebook())
    assert re.search(r"Total</th><th[^>]*>2 / 38</th>", resources["feedback_summary"]["html"])


def test_without_a_record_the_cells_outputs_say_it(tmp_path):
    _, resources = run(tmp_path, notebook())  # no reports/replay/stu.json
    rows = {r["grade_id"]: r for r in resources["feedback_summary"]["rows"]}
    assert rows["ex1_dcounts"]["verdict"] == " ".join(EVIL.split())
    assert "credit for a carried error" in rows["ex1_dnorm_logits"]["verdict"]
    assert rows["ex1_dlogprobs"]["verdict"] == "right"


def test_a_graders_score_is_the_rows(tmp_path):
    write_record(tmp_path)
    _, resources = run(tmp_path, notebook(gradebook={"ex1_dcounts": 1.0}))
    row = next(r for r in resources["feedback_summary"]["rows"] if r["grade_id"] == "ex1_dcounts")
    assert row["score"] == 1.0 and row["verdict"].endswith("(score set by a grader; the autograder gave 0)")


def test_a_student_id_is_not_a_path(tmp_path):
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "x.json").write_text(json.dumps({"verdicts": {"ex1_dcounts": {"hint": "leak"}}}))
    config = Config()
    config.CourseDirectory.root = str(tmp_path)
    assert FeedbackSummary(config=config)._record("../x", spec.NINJA) == {}


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("a = 1", "a = 1"),
        ("a = 1\n### BEGIN HIDDEN TESTS\nsecret()", "a = 1\n# graded by the kit: g"),  # unterminated
        ("from grader.incell import grade\ngrade('g', globals())\nb = 2", "# graded by the kit: g\nb = 2"),
        (
            "### BEGIN HIDDEN TESTS\nx\n### END HIDDEN TESTS\n" * 2 + "### BEGIN HIDDEN TESTS\ny",
            "# graded by the kit: g",
        ),
    ],
)
def test_strip_hidden_tests(source, expected):
    assert strip_hidden_tests(source, "g") == expected


# ------------------------------------------------------------ the page (FeedbackExporter)
def render(tmp_path, nb, resources_extra: dict, config: Config | None = None, page=None) -> str:
    """The exporter with the configuration GenerateFeedback gives it (template, paths, CSS);
    `page`: another from_notebook_node to call with it."""
    converter = GenerateFeedback(coursedir=CourseDirectory(root=str(tmp_path)), config=config or Config())
    resources = {"nbgrader": {"notebook": "nb", "score": 30.0, "max_score": 38.0, "late_penalty": 0}}
    resources.update(resources_extra)
    exporter = FeedbackExporter(config=converter.config)
    body, _ = (page or FeedbackExporter.from_notebook_node)(exporter, nb, resources)
    return body


def test_page_opens_with_the_summary(tmp_path, summary):
    nb, _, html = summary
    page = render(tmp_path, nb, {"feedback_summary": {"html": html}})
    assert page.index('id="kit-summary"') < page.index('id="notebook-container"')
    assert "(Score: 30.0 / 38.0)" in page
    assert "grader.incell" not in page and "# graded by the kit: ex1_dcounts</span>" in page
    assert "Test cell</a>" not in page  # nbgrader's list of links, replaced
    assert '<a name="ex1_dcounts"></a>' in page  # the anchor a row links to
    assert "FAIL ex1_dcounts: 0/1 points" in page  # the cells follow, with their outputs


def test_page_is_the_kits_even_when_the_template_is_pinned(tmp_path, summary):
    """nbgrader's API (the formgrader's button) sets HTMLExporter.template_name = 'feedback'."""
    config = Config()
    config.HTMLExporter.template_name = "feedback"
    page = render(tmp_path, summary[0], {"feedback_summary": {"html": summary[2]}}, config)
    assert 'id="kit-summary"' in page and "Test cell</a>" not in page


def test_without_the_summary_the_page_is_nbgraders(tmp_path):
    page = render(tmp_path, notebook(), {})
    assert "Test cell</a>" in page and 'id="kit-summary"' not in page


PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


def with_images(nb):
    """Plots as a student's cells show them: without alt text, with their own, with their cell's."""
    shown = new_code_cell("plt.plot(losses)")
    shown.outputs = [
        new_output("display_data", data={"image/png": PNG}),
        new_output(
            "display_data", data={"image/jpeg": "/9j/4AAQ"}, metadata={"image/jpeg": {"alt": "a curve"}}
        ),
    ]
    described = new_code_cell("plt.show()", metadata={"alt": "the cell's words"})
    described.outputs = [new_output("display_data", data={"image/png": PNG})]
    nb.cells += [shown, described]
    return nb


def _read(page: str):
    soup = BeautifulSoup(page, "html.parser")
    return soup.get_text(), [(i.get("alt"), i.get("src")[:30]) for i in soup.find_all("img")]


def test_the_page_says_what_htmlexporters_says_without_parsing_it_again(tmp_path, summary, monkeypatch):
    """HTMLExporter parses its whole page again with BeautifulSoup (two thirds of a feedback
    page's time) to add images' alt text: the kit's page has the same text and the same alt."""
    nb, extra = with_images(summary[0]), {"feedback_summary": {"html": summary[2]}}
    theirs = render(tmp_path, nb, json.loads(json.dumps(extra)), page=HTMLExporter.from_notebook_node)

    def no_second_parse(*args, **kwargs):
        raise AssertionError("the page was parsed again")

    monkeypatch.setattr("nbconvert.exporters.html.BeautifulSoup", no_second_parse)
    ours = render(tmp_path, nb, extra)
    assert _read(ours) == _read(theirs)
    assert [alt for alt, _ in _read(ours)[1]] == [NO_ALT, "a curve", "the cell's words"]
    pngs = [o for c in nb.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert len(pngs) == 2 and not any(o.metadata for o in pngs)  # the notebook itself is not changed
