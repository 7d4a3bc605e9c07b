"""grader/reports/class_report.py in-process: the page has every section, its numbers come from
the gradebook, its hints from the replay records, its images are real PNGs embedded and saved,
and nothing a student wrote reaches it as markup."""

from __future__ import annotations

import base64
import html
import re

import matplotlib.pyplot as plt
import pytest
from fake_class import BESSEL, HOSTILE, HOSTILE_HINT, make_class

from grader.exercise import spec
from grader.reports import class_data, class_report
from grader.reports.class_html import anchor

PNG = b"\x89PNG\r\n\x1a\n"
GRADE_IDS = [g.grade_id for g in spec.GRADED]
# nbgrader's own add_submission makes SQLAlchemy warn; not this code's concern
pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")]


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    return make_class(tmp_path_factory.mktemp("course"))


@pytest.fixture(scope="module")
def page(course):
    return class_report.write(course).read_text(encoding="utf-8")


def test_every_section_is_there(page):
    for section in ("summary", "pass-rates", "mistakes", "suspicious", "batch", "timings", "students"):
        assert f"id='{section}'" in page, section
    assert "4 graded submissions" in page  # dan never submitted
    assert page.count("<img ") == 3


def test_images_are_pngs_embedded_and_saved(course, page):
    embedded = [base64.b64decode(b) for b in re.findall(r"data:image/png;base64,([A-Za-z0-9+/=]+)", page)]
    saved = [
        (course / "reports" / f"class_{n}.png").read_bytes() for n in ("scores", "pass_rates", "heat_map")
    ]
    assert embedded == saved
    for data, path in zip(saved, ("scores", "pass_rates", "heat_map")):
        assert data.startswith(PNG)
        image = plt.imread(course / "reports" / f"class_{path}.png")
        assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100


def test_nothing_is_loaded_from_the_network(page):
    assert not re.search(r"(src|href)=['\"]?(https?:|//)", page)
    assert "default-src 'none'" in page


def test_pass_rates_in_backward_order(course, page):
    table = page.split("id='pass-rates'")[1].split("</table>")[0]
    assert re.findall(r"<tr><td>(ex\d_\w+)</td>", table) == GRADE_IDS
    rates = dict(class_data.load(course).pass_rates())
    assert rates["ex1_dbndiff2"] == 0.5 and rates["ex1_dlogprobs"] == 1.0  # ben and cat of four
    assert rates["ex2_dlogits"] == 0.75  # cat's manual 1.5 of 2 is not full points
    assert "<td>ex1_dbndiff2</td><td class='num'>1</td><td class='num'>50%</td>" in table


def test_mistakes_are_grouped_counted_and_linked(course, page):
    mistakes = class_data.load(course).mistakes()
    assert [(m.hint, m.students) for m in mistakes["ex1_dbndiff2"]] == [(BESSEL, ["ben", "cat"])]
    # maxdiff differs between the two students: one mistake, counted twice
    assert [len(m.students) for m in mistakes["ex4_dC"]] == [2]
    assert "ex1_dlogprobs" not in mistakes
    section = page.split("id='mistakes'")[1].split("</table>")[0]
    assert f"<b>2 students</b>: {html.escape(BESSEL)} in <code>ex1_dbndiff2</code>" in section
    for student in ("ben", "cat"):
        assert f'href="#{anchor(student)}"' in section and f"<section id='{anchor(student)}'>" in page


def test_each_student_section_lists_the_verdicts(page):
    ben = page.split(f"<section id='{anchor('ben')}'>")[1].split("</section>")[0]
    assert "35 / 38" in ben and "ex3 0/2" in ben
    assert re.findall(r"<td>(ex\d_\w+)</td>", ben) == GRADE_IDS
    assert "<tr class='fail'><td>ex1_dbndiff2</td><td class='num'>0/1</td>" in ben


def test_student_strings_are_escaped(page):
    assert HOSTILE not in page and "<script" not in page and "<img src=x" not in page
    assert html.escape(HOSTILE) in page  # shown as typed
    assert html.escape(HOSTILE_HINT) in page
    assert "the &lt;b&gt;reference&lt;/b&gt; was imported" in page  # a suspicion's reason


def test_suspicious_list_with_evidence(page):
    section = page.split("id='suspicious'")[1].split("<h2")[0]
    assert html.escape(HOSTILE) in section and "finding: reads grader/reference/steps.py" in section
    assert "ben" not in section


def test_batch_problems_and_timings(page):
    section = page.split("id='batch'")[1].split("<h2")[0]
    assert "Batch: 42.0 s" in section and "median 1.2 s, slowest 2.5 s, 4 records" in section
    assert "run ex4: timeout" in section and "your notebook was renamed" in section
    assert "graded ben (1/4)" in section and "NBGRADER-NOISE" not in section  # the batch's part only


def test_a_class_without_records_still_gets_a_page(tmp_path):
    from fake_class import make_gradebook

    make_gradebook(tmp_path)
    page = class_report.write(tmp_path).read_text()
    assert "No replay record." in page and "id='mistakes'" in page and "None." in page
