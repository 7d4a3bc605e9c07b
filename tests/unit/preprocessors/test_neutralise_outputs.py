"""grader/preprocessors/neutralise_outputs.py in-process: one small notebook per kind of active
content a student's kernel or cells can produce, one call of the preprocessor, and what is left.
Honest outputs (a plot, text, a stream, a traceback, a plain HTML table) come through unchanged."""

from __future__ import annotations

import base64
import io
import uuid
from html.parser import HTMLParser

import nbformat
import pytest
from nbconvert import HTMLExporter
from nbconvert.exporters.exporter import ResourcesDict
from nbconvert.filters import markdown2html
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_raw_cell
from traitlets.config import Config

from grader.preprocessors.neutralise_outputs import NeutraliseOutputs, literal_markdown
from grader.preprocessors.rebuild_from_source import NOTE_MARK

INTRO = "# The assignment\n\nSome <b>instructor</b> markdown."


def _instructor(source=INTRO, cell_type="markdown"):
    cell = new_markdown_cell(source) if cell_type == "markdown" else new_raw_cell(source)
    cell.metadata["nbgrader"] = {
        "grade": False,
        "grade_id": "intro",
        "locked": True,
        "schema_version": 3,
        "solution": False,
        "task": False,
    }
    return cell


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """A course folder holding only the source notebook the preprocessor compares with."""
    root = tmp_path_factory.mktemp("neutralise")
    (root / "source" / "a").mkdir(parents=True)
    nbformat.write(
        new_notebook(cells=[_instructor(), new_code_cell("x = 1")]), root / "source" / "a" / "nb.ipynb"
    )
    return root


def run(course, *cells, metadata=None):
    config = Config()
    config.CourseDirectory.root = str(course)
    nb = nbformat.from_dict(
        {"nbformat": 4, "nbformat_minor": 5, "metadata": metadata or {}, "cells": list(cells)}
    )
    resources = ResourcesDict(nbgrader={"assignment": "a", "notebook": "nb", "student": "s1"})
    return NeutraliseOutputs(config=config).preprocess(nb, resources)[0]


def code(*outputs, execution_count=None):
    """A code cell as the kernel left it: not validated, since a crafted output need not be."""
    return nbformat.from_dict(
        {
            "cell_type": "code",
            "id": uuid.uuid4().hex[:8],
            "source": "pass",
            "metadata": {},
            "execution_count": execution_count,
            "outputs": list(outputs),
        }
    )


def display(data, metadata=None, kind="display_data", **kw):
    return dict(output_type=kind, data=data, metadata=metadata or {}, **kw)


def outputs(nb):
    return nb.cells[0].outputs


class ActiveContent(HTMLParser):
    """What in a rendered page can run: script elements with a payload, event-handler
    attributes, script URLs, embedded documents and frames."""

    def __init__(self, html: str):
        super().__init__()
        self.found: list[str] = []
        self._in_script = False
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        self._in_script = tag == "script"
        for name, value in attrs:
            if name.startswith("on"):
                self.found.append(f"<{tag} {name}>")
            if name in ("href", "src", "action", "xlink:href") and (value or "").strip().lower().startswith(
                ("javascript:", "data:text/html", "vbscript:")
            ):
                self.found.append(f"<{tag} {name}={value[:20]}>")
        if tag in ("iframe", "object", "embed", "svg", "math", "base", "form") or (
            tag == "meta" and "http-equiv" in dict(attrs)
        ):
            self.found.append(f"<{tag}>")

    def handle_data(self, data):
        if self._in_script and "__pwned" in data:
            self.found.append("<script>payload")

    def handle_endtag(self, tag):
        self._in_script = False


def _png() -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(1, 1))
    ax.plot([0, 1], [1, 0])
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return base64.encodebytes(buf.getvalue()).decode()  # with newlines, as IPython writes it


PNG = _png()
PAYLOAD = "window.__pwned=(window.__pwned||[]).concat(['x']);fetch('/api/kernels',{method:'POST'})"


# ---------------------------------------------------------------- outputs
def test_script_and_event_handlers_in_html_are_escaped(course):
    html = (
        f'<script>{PAYLOAD}</script><img src=x onerror="{PAYLOAD}"><b>bold</b>'
        f"<svg onload=\"{PAYLOAD}\"></svg><iframe srcdoc='<script>{PAYLOAD}</script>'></iframe>"
        f'<p style="background:url(//evil)" class="cell" onclick="{PAYLOAD}">p</p>'
    )
    placeholder = "<IPython.core.display.HTML object>"
    (out,) = outputs(run(course, code(display({"text/html": html, "text/plain": placeholder}))))
    clean = out.data["text/html"]
    assert not ActiveContent(clean).found
    for gone in ("<script", "<img", "<svg", "<iframe", "style=", 'class="cell"', "onclick"):
        assert gone not in clean
    assert "&lt;script&gt;" in clean and "<b>bold</b>" in clean and "<p>p</p>" in clean
    assert out.data["text/plain"] == placeholder


def test_only_absolute_http_links_survive(course):
    html = (
        '<a href="javascript:alert(1)">a</a><a href=" JaVaScRiPt:alert(1)">b</a>'
        '<a href="evil.html">c</a><a href="/api/kernels">d</a><a href="data:text/html,x">e</a>'
        '<a href="https://example.org/x" title="t">f</a>'
    )
    (out,) = outputs(run(course, code(display({"text/html": html}))))
    clean = out.data["text/html"]
    assert clean.count("href") == 1 and '<a href="https://example.org/x" title="t">f</a>' in clean
    assert not ActiveContent(clean).found


def test_html_is_kept_away_from_mathjax(course):
    (out,) = outputs(run(course, code(display({"text/html": r"<td>$\href{javascript:x}{y}$</td>"}))))
    assert out.data["text/html"].startswith('<div class="tex2jax_ignore mathjax_ignore">')


def test_javascript_output_is_dropped(course):
    nb = run(
        course,
        code(
            display(
                {"application/javascript": PAYLOAD, "text/plain": "<IPython.core.display.Javascript object>"}
            ),
            display({"application/javascript": PAYLOAD}),
        ),
    )
    first, second = outputs(nb)
    assert first.data == {"text/plain": "<IPython.core.display.Javascript object>"}
    assert second.data == {"text/plain": "[JavaScript output removed by the autograder]"}


def test_svg_is_dropped(course):
    svg = f'<svg xmlns="http://www.w3.org/2000/svg" onload="{PAYLOAD}"><script>{PAYLOAD}</script></svg>'
    (out,) = outputs(
        run(course, code(display({"image/svg+xml": svg, "text/html": f"<script>{PAYLOAD}</script>"})))
    )
    assert set(out.data) == {"text/html", "text/plain"}
    assert out.data["text/plain"] == "[SVG output removed by the autograder]"
    assert "<script" not in out.data["text/html"]


def test_markdown_and_latex_outputs_become_their_source_as_text(course):
    md = f'# Title\n\n<img src=x onerror="{PAYLOAD}"> [x](javascript:{PAYLOAD})'
    nb = run(
        course,
        code(
            display({"text/markdown": md, "text/plain": "<IPython.core.display.Markdown object>"}),
            display({"text/latex": r"$\href{javascript:x}{y}$"}),
            display({"text/latex": r"$x^2$", "text/plain": "x**2"}),
        ),
    )
    markdown, latex, sympy = outputs(nb)
    assert markdown.data == {"text/plain": md}
    assert latex.data == {"text/plain": r"$\href{javascript:x}{y}$"}
    assert sympy.data == {"text/plain": "x**2"}  # a real text form is kept


def test_output_metadata_and_transient_are_dropped(course):
    crafted = display(
        {"image/png": PNG, "text/plain": "<Figure>"},
        metadata={
            "image/png": {"width": f'1" onerror="{PAYLOAD}', "height": "1 onload=x"},
            "filenames": {"image/png": 'x" onerror="y'},
            "text/html": {"isolated": True},
        },
        transient={"display_id": "x"},
    )
    (out,) = outputs(run(course, code(crafted)))
    assert out.metadata == {} and "transient" not in out
    assert out.data["image/png"] == PNG.replace("\n", "")


@pytest.mark.parametrize(
    "fake",
    [
        f'x" onerror="{PAYLOAD}',
        'iVBORw0KGgo=" onload="x',
        base64.b64encode(b"<svg onload=x>").decode(),
        "",
        "@@@@",
    ],
)
def test_image_data_that_is_not_a_png_is_dropped(course, fake):
    (out,) = outputs(
        run(
            course,
            code(
                display({"image/png": fake}),
            ),
        )
    )
    assert out.data == {"text/plain": "[image output removed by the autograder]"}


def test_widgets_unknown_mimetypes_and_output_types(course):
    nb = run(
        course,
        code(
            display({"application/vnd.jupyter.widget-view+json": {"model_id": "x"}}),
            display({"application/x-evil": "<script>", "text/plain": "ok"}),
            {"output_type": "evil", "data": {"text/html": f"<script>{PAYLOAD}</script>"}},
        ),
        metadata={"widgets": {"application/vnd.jupyter.widget-state+json": {"state": {"x": "</script>"}}}},
    )
    widget, other, unknown = outputs(nb)
    assert widget.data == {"text/plain": "[widget output removed by the autograder]"}
    assert other.data == {"text/plain": "ok"}
    assert unknown.output_type == "display_data"
    assert unknown.data == {"text/plain": "[unknown output removed by the autograder]"}
    assert "widgets" not in nb.metadata


def test_crafted_stream_names_and_execution_counts_become_plain(course):
    cell = code(
        {"output_type": "stream", "name": f'stdout"><script>{PAYLOAD}</script>', "text": ["a", "b"]},
        display({"text/plain": "1"}, kind="execute_result", execution_count="<script>x</script>"),
        {"output_type": "error", "ename": 1, "evalue": None, "traceback": "not a list"},
        execution_count="<img src=x onerror=y>",
    )
    nb = run(course, cell)
    stream, result, error = outputs(nb)
    assert (stream.name, stream.text) == ("stdout", "ab")
    assert result.execution_count is None and nb.cells[0].execution_count is None
    assert (error.ename, error.evalue, error.traceback) == ("1", "", [])


def test_honest_outputs_survive(course):
    table = (
        '<table border="1" class="dataframe"><thead><tr><th>a</th><th colspan="2">b</th></tr></thead>'
        "<tbody><tr><td>1</td><td>2</td><td>3</td></tr></tbody></table>"
    )
    honest = [
        {"output_type": "stream", "name": "stdout", "text": "logprobs | exact: True | approximate: True\n"},
        {"output_type": "stream", "name": "stderr", "text": "a warning\n"},
        display({"image/png": PNG, "text/plain": "<Figure size 100x100 with 1 Axes>"}),
        display({"text/html": table, "text/plain": "   a  b"}),
        display({"text/plain": "tensor(3.3112)"}, kind="execute_result", execution_count=7),
        {
            "output_type": "error",
            "ename": "NameError",
            "evalue": "name 'dprobs' is not defined",
            "traceback": ["\x1b[0;31mNameError\x1b[0m: name 'dprobs' is not defined"],
        },
    ]
    nb = run(course, code(*honest, execution_count=7))
    got = outputs(nb)
    assert [o.output_type for o in got] == [o["output_type"] for o in honest]
    assert got[0].text == honest[0]["text"] and got[1].name == "stderr"
    assert got[2].data == {"image/png": PNG.replace("\n", ""), "text/plain": honest[2]["data"]["text/plain"]}
    assert '<th colspan="2">b</th>' in got[3].data["text/html"] and "<td>3</td>" in got[3].data["text/html"]
    assert got[4].data == {"text/plain": "tensor(3.3112)"} and got[4].execution_count == 7
    assert got[5].traceback == honest[5]["traceback"] and got[5].evalue == honest[5]["evalue"]
    assert nb.cells[0].execution_count == 7


# ---------------------------------------------------------------- cells
ATTACK_MD = (
    f'Hi <script>{PAYLOAD}</script>\n\n<img src=x onerror="{PAYLOAD}">\n\n'
    f'[click](javascript:{PAYLOAD}) <a href="evil.html">local</a>\n\n'
    "````\n```\n</code></pre><script>window.__pwned=1</script>\n````\n\n$$\\href{javascript:x}{y}$$"
)


def test_a_students_markdown_cell_is_shown_as_its_source(course):
    cell = new_markdown_cell(ATTACK_MD, attachments={"a.png": {"image/png": PNG}})
    nb = run(course, _instructor(), cell)
    mine = nb.cells[1]
    assert mine.cell_type == "markdown" and "attachments" not in mine and mine.metadata == {}
    assert mine.source == literal_markdown(ATTACK_MD) and mine.source.startswith("`````\n")
    rendered = markdown2html(mine.source)
    assert not ActiveContent(rendered).found
    assert rendered.count("<pre>") == 1 and "&lt;script&gt;" in rendered
    assert nb.cells[0].source == INTRO  # the instructor's is left alone


def test_raw_cells_and_copied_nbgrader_metadata_do_not_pass(course):
    raw = new_raw_cell(
        f"<script>{PAYLOAD}</script>", metadata={"format": "text/html", "raw_mimetype": "text/html"}
    )
    forged = _instructor(f'<img src=x onerror="{PAYLOAD}">')  # right grade id, other source
    unknown = new_markdown_cell("<b>x</b>", metadata={"nbgrader": {"grade_id": "mine", "solution": False}})
    retyped = _instructor(cell_type="raw")  # right source, other type
    sources = [raw.source, forged.source, unknown.source, retyped.source]
    nb = run(course, raw, forged, unknown, retyped)
    for cell, source in zip(nb.cells, sources):
        assert cell.cell_type == "markdown" and cell.source == literal_markdown(source)
    assert nb.cells[0].metadata == {} and nb.cells[2].metadata == {}
    assert nb.cells[1].metadata.nbgrader["grade_id"] == "intro"  # still graded as that cell


def test_the_kits_note_is_left_alone_only_at_the_top(course):
    note = new_markdown_cell("**Autograder note.** rebuilt", metadata={NOTE_MARK: True})
    fake = new_markdown_cell("<script>x</script>", metadata={NOTE_MARK: True})
    nb = run(course, note, fake)
    assert nb.cells[0].source == note.source
    assert nb.cells[1].source == literal_markdown("<script>x</script>")


def test_without_the_source_notebook_no_cell_passes_as_the_instructors(tmp_path):
    nb = run(tmp_path, _instructor())
    assert nb.cells[0].source == literal_markdown(INTRO)


@pytest.mark.parametrize("source", ["", "`", "a ``` b", "```python\nx\n```", "``````"])
def test_no_source_can_close_its_fence(source):
    rendered = markdown2html(literal_markdown(source) + "\n\n<b>after</b>")
    assert rendered.count("<pre>") == 1 and "<b>after</b>" in rendered


# ---------------------------------------------------------------- the whole page
def _attack_notebook():
    return [
        _instructor(),
        new_markdown_cell(ATTACK_MD),
        code(
            display({"text/html": f'<script>{PAYLOAD}</script><img src=x onerror="{PAYLOAD}">'}),
            display({"application/javascript": PAYLOAD}),
            display({"image/svg+xml": f'<svg xmlns="http://www.w3.org/2000/svg" onload="{PAYLOAD}"/>'}),
            display({"text/markdown": f'<img src=x onerror="{PAYLOAD}">'}),
            display({"image/png": PNG}, metadata={"image/png": {"width": f"1 onerror={PAYLOAD}"}}),
            display({"image/png": f'x" onerror="{PAYLOAD}'}),
        ),
    ]


def test_the_rendered_page_has_no_active_content_left(course):
    exporter = HTMLExporter(template_name="classic")
    before = exporter.from_notebook_node(new_notebook(cells=_attack_notebook()))[0]
    after = exporter.from_notebook_node(run(course, *_attack_notebook()))[0]
    assert len(ActiveContent(before).found) >= 6  # the detector sees the attacks ...
    assert ActiveContent(after).found == []  # ... and none is left
    assert "Some <b>instructor</b> markdown." in after
