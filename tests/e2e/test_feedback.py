"""End to end with real nbgrader: the demo class autograded, then `nbgrader generate_feedback`
with the repo's nbgrader_config.py plus the lines that enable FeedbackSummary: each page opens
with a table of every gradient (points, "right" or the hint, a link to its cell) and shows
none of the hidden tests' source."""

from __future__ import annotations

import html
import re

import pytest

from grader.exercise import spec

from conftest import copy_course
from corpus import EXPECTED_ZEROS

ROW = re.compile(r'<tr class="(\w+)" data-grade-id="([^"]+)">(.*?)</tr>', re.S)


@pytest.fixture(scope="module")
def course(tmp_path_factory, graded_demo):
    """The demo class graded with the repo's nbgrader_config.py, its feedback generated
    (conftest's graded_demo, shared with other modules: a copy of our own)."""
    return copy_course(graded_demo.course, tmp_path_factory.mktemp("feedback"))


def page(course, student: str) -> str:
    return (course / "feedback" / student / spec.ASSIGNMENT / f"{spec.NOTEBOOK}.html").read_text()


def text(page: str) -> str:
    """What a reader sees: pygments splits code into spans, so a phrase is looked for here."""
    page = re.sub(r"<(style|script)\b.*?</\1>", "", page, flags=re.S | re.I)
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def rows(page: str) -> dict[str, tuple[str, list[str]]]:
    """grade id -> (the row's class, its cells as text), in the table's order."""
    return {
        gid: (kind, [text(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", cells, re.S)])
        for kind, gid, cells in ROW.findall(page)
    }


@pytest.mark.parametrize("student", sorted(EXPECTED_ZEROS))
def test_page_opens_with_every_gradient_and_its_points(course, student):
    p = page(course, student)
    assert p.index('id="kit-summary"') < p.index('id="notebook-container"')
    assert "Test cell</a>" not in p  # nbgrader's own list of links is gone
    table = rows(p)
    assert list(table) == [g.grade_id for g in spec.GRADED]
    for g in spec.GRADED:
        points = 0.0 if g.grade_id in EXPECTED_ZEROS[student] else g.points
        kind, cells = table[g.grade_id]
        assert cells[1:4] == [g.name, g.grade_id, f"{points:g} / {g.points:g}"], (student, cells)
        assert f'<a href="#{g.grade_id}"><code>{g.name}</code></a>' in p
        assert f'<a name="{g.grade_id}"></a>' in p  # the anchor the link goes to: the cell's heading
        if points == g.points:
            assert (kind, cells[4]) == ("success", "right") or (
                kind == "info" and "credit for a carried error" in cells[4]
            ), (student, cells)


@pytest.mark.parametrize("student", sorted(EXPECTED_ZEROS))
def test_total_is_the_gradebooks(course, student):
    total = spec.total_points() - sum(spec.BY_GRADE_ID[g].points for g in EXPECTED_ZEROS[student])
    p = page(course, student)
    assert re.search(rf"\(Score: {total:.1f}\s*/\s*{spec.total_points():.1f}\)", p)  # the page's heading
    assert re.search(rf"Total</th><th[^>]*>{total:g} / {spec.total_points():g}</th>", p)


@pytest.mark.parametrize("student", sorted(EXPECTED_ZEROS))
def test_hidden_tests_are_not_shown(course, student):
    autograded = (course / "autograded" / student / spec.ASSIGNMENT / f"{spec.NOTEBOOK}.ipynb").read_text()
    assert "BEGIN HIDDEN TESTS" in autograded  # what there was to hide
    seen = text(page(course, student))
    for hidden in ("BEGIN HIDDEN TESTS", "END HIDDEN TESTS", "from grader.incell import grade", "grade("):
        assert hidden not in seen, (student, hidden)
    assert "# graded by the kit: ex1_dlogprobs" in seen
    assert 'assert "dlogprobs" in globals()' in seen  # the visible part of the test stays


def test_bob_reads_bessels_correction(course):
    p = page(course, "bob")
    table = rows(p)
    kind, cells = table["ex1_dbndiff2"]
    assert kind == "danger" and cells[3] == "0 / 1" and "Bessel's correction" in cells[4]
    kind, cells = table["ex3_dhprebn"]
    assert kind == "danger" and cells[3] == "0 / 2" and "Bessel's correction" in cells[4]
    # what received dbndiff2 still gets its points, and says why
    assert "received a wrong dbndiff2" in table["ex1_dbndiff"][1][4]
    assert "FAIL ex1_dbndiff2: 0/1 points" in p  # the cells follow, with their verdicts


def test_carol_reads_the_lost_branch(course):
    p = page(course, "carol")
    table = rows(p)
    kind, cells = table["ex1_dcounts"]
    assert kind == "danger" and cells[3] == "0 / 1"
    assert "through counts_sum" in cells[4] and "(+=)" in cells[4]
    raw = {gid: cells for _, gid, cells in ROW.findall(p)}["ex1_dcounts"]
    assert "<code>counts_sum</code>" in raw  # the hint's `code`, shown as code
    assert "credit for a carried error" in table["ex1_dnorm_logits"][1][4]
    assert table["ex1_dprobs"][1][4] == "right"


def test_existing_verdict_text_is_still_there(course):
    """test_autograde.py's feedback checks hold with the summary enabled."""
    assert "PASS ex1_dlogprobs: 1/1 points" in page(course, "alice")
    assert "FAIL ex1_dcounts: 0/1 points" in page(course, "carol")
    assert "NotImplementedError" in page(course, "erin")


def test_feedback_folders_hold_no_copy_of_the_data(course):
    """nbgrader copies every file of the autograded folder; the kit's hook takes names.txt out."""
    for student in EXPECTED_ZEROS:
        folder = course / "feedback" / student / spec.ASSIGNMENT
        assert (folder / f"{spec.NOTEBOOK}.html").is_file()
        assert not (folder / "names.txt").exists(), sorted(p.name for p in folder.iterdir())
        assert (course / "autograded" / student / spec.ASSIGNMENT / "names.txt").is_file()
