"""In a real browser (headless Debian Chromium through Playwright) against a real `jupyter lab`:

1. a student opens a copy of the release notebook in JupyterLab, writes exercise 1 with a
   transposed dW2, runs the notebook, reads the comparison cell's W2 line and clicks
   nbgrader's Validate button;
2. an instructor opens the formgrader of the graded demo class, finds the assignment, goes
   to bob's submission and reads the verdict of his wrong gradient;
3. the class report and bob's feedback page, opened from disk, show their plots and (the
   feedback) the gradients at the top.

Each test leaves a screenshot in reports/screenshots/. The demo class is graded once for
the session (conftest's graded_demo), and each Jupyter server is started once for the module."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import browser as web
import nbformat
import pytest

from grader.exercise import spec
from grader.exercise.cells import nbgrader_meta
from grader.incoming.submissions import fill, reference_answers
from grader.reference.backprop_ninja.samples import DEMO

from conftest import ROOT, copy_course
from corpus import EXPECTED_ZEROS

pytestmark = pytest.mark.skipif(bool(web.chromium_missing()), reason=str(web.chromium_missing()))

NB_FILE = f"{spec.NOTEBOOK}.ipynb"
WRONG_DW2 = "dW2 = dlogits.T @ h"  # dave's mistake: (27, 64) where W2 is (64, 27)


def _cell(nb: nbformat.NotebookNode, grade_id: str) -> nbformat.NotebookNode:
    return next(c for c in nb.cells if nbgrader_meta(c).get("grade_id") == grade_id)


@pytest.fixture(scope="module")
def chromium():
    with web.chromium() as b:
        yield b


@pytest.fixture
def page(chromium):
    context = chromium.new_context(viewport={"width": 1400, "height": 1000})
    p = context.new_page()
    p.set_default_timeout(60_000)
    web.local_only(p)
    yield p
    context.close()


# ---------------------------------------------------------------- 1. the student in JupyterLab
@pytest.fixture(scope="module")
def student_lab(tmp_path_factory, names_txt):
    """A copy of the repo's release folder (never the repo's own: JupyterLab would leave
    .ipynb_checkpoints there) with names.txt, served by `jupyter lab`."""
    home = tmp_path_factory.mktemp("student")
    work = home / "work"
    shutil.copytree(
        ROOT / "release" / spec.ASSIGNMENT, work, ignore=shutil.ignore_patterns(".ipynb_checkpoints")
    )
    shutil.copy(names_txt, work / "names.txt")
    with web.jupyter_lab(work, home / "jupyter") as server:
        yield server


def _wrong_answer(release_nb: nbformat.NotebookNode) -> str:
    """The ex1 answer cell as the student leaves it: the lecture's solution with dW2
    transposed (the demo's dave), in place of the stub."""
    source_nb = nbformat.read(ROOT / "source" / spec.ASSIGNMENT / NB_FILE, 4)
    dave = next(s for s in DEMO if s.student == "dave")
    answer = dave.answers(reference_answers(source_nb))["ex1_solution"]
    assert WRONG_DW2 in answer
    return _cell(fill(release_nb, {"ex1_solution": answer}), "ex1_solution").source


def _code_cell(page, text: str):
    return page.locator(".jp-NotebookPanel .jp-CodeCell").filter(has_text=text)


@pytest.fixture(scope="module")
def student_page(student_lab, chromium):
    """JupyterLab with the notebook open: the ex1 answer typed into its cell, then Run > Run
    All Cells, until the comparison cell has run (Run All stops at the first error: the stub
    of exercise 2 at the latest)."""
    release_nb = nbformat.read(student_lab.root / NB_FILE, 4)
    typed = _wrong_answer(release_nb)
    context = chromium.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(60_000)
    web.local_only(page)
    web.open_notebook(page, student_lab, NB_FILE, cells=len(release_nb.cells))

    answer_cell = _code_cell(page, "backprop through the whole thing manually")
    web.expect_count(answer_cell, 1)
    answer_cell.locator(".cm-content").click()
    page.keyboard.press("Control+A")
    page.keyboard.insert_text(typed)

    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()
    check = _code_cell(page, "compare with autograd: run this after your cell above")
    web.expect_count(check, 1)
    page.wait_for_function(  # "[ ]:" not run, "[*]:" queued or running, "[12]:" done
        "el => /\\[\\d+\\]/.test(el.innerText)",
        arg=check.locator(".jp-InputArea-prompt").element_handle(),
        timeout=240_000,
    )
    page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").wait_for(timeout=240_000)
    yield page, typed
    context.close()


def test_student_sees_the_w2_hint_in_the_comparison(student_page, student_lab):
    page, _ = student_page
    check = _code_cell(page, "compare with autograd: run this after your cell above")
    output = check.locator(".jp-OutputArea").inner_text()
    check.locator(".jp-OutputArea").scroll_into_view_if_needed()
    web.screenshot(page, "student_ex1_check")
    assert "Traceback" not in output and "RuntimeError" not in output, output
    lines = {l.split("|")[0].strip(): l for l in output.splitlines() if "|" in l and l.split("|")[0].strip()}
    assert "W2" in lines, f"no line for W2 (did cmp raise on the shapes?):\n{output}"
    # "W2              | shape (27, 64), expected (64, 27): transposed? ..."
    assert "transposed" in lines["W2"], lines["W2"]
    # one line per cmp(...) of the cell: it went on after W2, down to C
    check_source = _cell(nbformat.read(student_lab.root / NB_FILE, 4), "ex1_check").source
    names = re.findall(r"^cmp\('(\w+)'", check_source, re.M)
    assert list(lines) == names, output
    # dW2 feeds nothing: every other gradient is the lecture's and must be shown as right
    wrong = {k: l for k, l in lines.items() if k != "W2" and "approximate: True" not in l}
    assert not wrong, f"the lecture's own gradients are not shown as right: {wrong}"
    assert "hint:" not in output.replace(lines["W2"], ""), output


def test_student_validates_and_sees_the_results(student_page, student_lab):
    page, typed = student_page
    page.locator(".validate-button").click()
    dialog = page.locator(".jp-Dialog")
    dialog.wait_for(timeout=300_000)  # Validate saves, then runs the whole notebook in a new kernel
    text = dialog.inner_text()
    web.screenshot(page, "student_validate")
    assert "Validation Results" in text, text
    # the tests that fail: exercise 4's, whose answer is still the stub (ex1 defines dlogits
    # and dhprebn, so the presence checks of exercises 2 and 3 pass)
    assert "The following cell failed:" in text, text
    assert "ex4_dC" in text and "manual_backward gave no gradients" in text, text[:2000]
    assert "ex1_" not in text, "exercise 1 defines every gradient: none of its checks may fail"
    # what was validated is what the student typed: Validate saved it first
    saved = nbformat.read(student_lab.root / NB_FILE, 4)
    assert _cell(saved, "ex1_solution").source.strip() == typed.strip()
    assert WRONG_DW2 in _cell(saved, "ex1_solution").source
    page.locator(".jp-Dialog .jp-mod-accept").click()
    dialog.wait_for(state="detached")


# ---------------------------------------------------------------- 2. and 3. the graded demo class
@pytest.fixture(scope="module")
def graded_course(tmp_path_factory, graded_demo) -> Path:
    """The demo class graded with the repo's config, its class report and feedback written
    (conftest's graded_demo, shared with other modules: a copy of our own, which the
    formgrader's server runs in)."""
    return copy_course(graded_demo.course, tmp_path_factory.mktemp("browser_course"))


@pytest.fixture(scope="module")
def formgrader(graded_course, tmp_path_factory):
    """`jupyter lab` started in the course folder: the formgrader reads its nbgrader_config.py."""
    with web.jupyter_lab(graded_course, tmp_path_factory.mktemp("instructor")) as server:
        yield server


def test_instructor_reads_bobs_verdicts_in_the_formgrader(formgrader, page):
    total = spec.total_points()
    bob_total = total - sum(spec.BY_GRADE_ID[g].points for g in EXPECTED_ZEROS["bob"])

    page.goto(formgrader.url("/formgrader"))
    assert page.url.endswith("/formgrader/manage_assignments")
    row = page.locator("tbody tr").filter(has=page.locator("td", has_text=spec.ASSIGNMENT))
    row.first.wait_for()
    assert row.count() == 1
    submissions = row.get_by_role("link", name=str(len(DEMO)), exact=True)  # "# Submissions": 5
    assert submissions.count() == 1
    submissions.click()

    page.wait_for_url(f"**/formgrader/manage_submissions/{spec.ASSIGNMENT}")
    bob = page.locator("tbody tr").filter(has=page.locator("td.student-id", has_text="bob"))
    bob.wait_for()
    assert bob.locator("td.status").inner_text().strip() == "graded"
    assert bob.locator("td.score").inner_text().strip() == f"{bob_total:g} / {total:g}"
    bob.locator("td.student-name a").click()

    page.wait_for_url(f"**/formgrader/manage_students/bob/{spec.ASSIGNMENT}")
    page.get_by_role("link", name=spec.NOTEBOOK, exact=True).click()
    page.wait_for_url("**/formgrader/submissions/*/")
    verdict = page.get_by_text("FAIL ex1_dbndiff2: 0/1 points")
    verdict.wait_for()
    verdict.scroll_into_view_if_needed()
    web.screenshot(page, "formgrader_bob")
    text = page.inner_text("body")
    assert "Bessel's correction" in text
    assert "FAIL ex3_dhprebn" in text
    assert "PASS ex1_dbndiff: 1/1 points" in text  # received the wrong dbndiff2, right rule
    assert "PASS ex1_dlogprobs: 1/1 points" in text


def test_verdict_lines_wrap_inside_the_formgraders_cells(formgrader, page):
    """erin left every stub: her hints quote the error (up to 240 characters); on a laptop's
    width each wraps inside its cell instead of running past the right edge."""
    page.set_viewport_size({"width": 1024, "height": 900})
    page.goto(formgrader.url("/formgrader"))  # logs in: a deeper page's API calls need the cookie
    page.wait_for_url("**/formgrader/manage_assignments")
    page.goto(f"{formgrader.base}/formgrader/manage_students/erin/{spec.ASSIGNMENT}")
    page.get_by_role("link", name=spec.NOTEBOOK, exact=True).click()
    page.wait_for_url("**/formgrader/submissions/*/")
    page.get_by_text("FAIL ex1_dlogprobs: 0/1 points").wait_for()
    verdicts = page.evaluate(
        r"""() => [...document.querySelectorAll('pre')]
            .filter(p => /^(PASS|FAIL) \S+: .* points\n/.test(p.textContent))
            .map(p => ({text: p.textContent, over: p.scrollWidth - p.clientWidth}))"""
    )
    web.screenshot(page, "formgrader_erin_wrapped")
    assert len(verdicts) == len(spec.GRADED)
    assert max(len(l) for v in verdicts for l in v["text"].splitlines()) > 80  # long hints are there
    assert [v["text"][:40] for v in verdicts if v["over"] > 0] == []


def test_class_report_shows_its_plots(graded_course, page):
    report = graded_course / "reports" / "class.html"
    page.goto(report.as_uri(), wait_until="load")
    web.screenshot(page, "class_report", full_page=True)
    images = web.images_loaded(page)
    assert len(images) >= 3, images  # the score distribution, the pass rates, the heat map
    assert all(i["src"].startswith("data:image/png;base64,") for i in images), images  # self-contained
    assert all(i["width"] > 0 for i in images), images
    text = page.inner_text("body")
    for s in DEMO:
        assert s.student in text, s.student
    assert "ex1_dbndiff2" in text and "Bessel" in text  # bob's mistake in the list of mistakes


def test_feedback_opens_with_the_gradients(graded_course, page):
    feedback = graded_course / "feedback" / "bob" / spec.ASSIGNMENT / f"{spec.NOTEBOOK}.html"
    page.goto(feedback.as_uri(), wait_until="load")
    web.screenshot(page, "feedback_bob")
    images = web.images_loaded(page)
    assert all(i["width"] > 0 for i in images), images
    text = page.inner_text("body")
    assert "FAIL ex1_dbndiff2: 0/1 points" in text  # the graded cells with their verdicts
    first_code = page.locator(".code_cell, .jp-CodeCell").first
    top = first_code.bounding_box()["y"]
    for shown in ("dbndiff2", "Bessel"):  # the summary: gradients and hints above the notebook
        first = page.get_by_text(shown).first
        assert first.count() and first.bounding_box()["y"] < top, (
            f"{shown!r} is not shown above the first code cell: no summary table at the top of the feedback"
        )
