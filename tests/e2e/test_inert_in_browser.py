"""End to end, in a real browser: a submission whose cells produce every kind of active
content (script in HTML, event handlers, JavaScript, SVG, markdown with raw HTML, crafted
image data and metadata, raw HTML and script links in a markdown cell of its own) is graded
by the real `nbgrader autograde` (the kit's config, sandboxed kernel), and neither its
feedback page nor the formgrader's view of it runs any of it: no payload sets its marker in
any frame, and no kernel is started with the TA's session. A control graded with
NeutraliseOutputs switched off runs the same payloads, so the detector is known to work."""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import socket
import struct
import subprocess
import time
import urllib.request
import zlib
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

from grader.confine import bwrap_works
from grader.exercise import spec
from grader.incoming.submissions import fill, reference_answers

from conftest import VENV_BIN, nbgrader

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = [
    pytest.mark.skipif(
        not os.access(CHROMIUM, os.X_OK),
        reason="Debian's chromium is needed (apt-get install chromium chromium-driver; .ci/run does it)",
    ),
    pytest.mark.skipif(not bwrap_works(), reason="bubblewrap is needed (.ci/run installs it)"),
]
HONEST, ATTACKER, CONTROL = "alice", "mallory", "mallory_unprotected"


def js(tag: str) -> str:
    """A payload: leaves a marker, then starts a kernel with the viewer's session (the _xsrf
    cookie is readable by any script on the page). No double quotes, no spaces."""
    return (
        f"window.__pwned=(window.__pwned||[]).concat(['{tag}']);"
        "fetch('/api/kernels',{method:'POST',body:'{}',"
        "headers:{'X-XSRFToken':(document.cookie.match(/_xsrf=([^;]*)/)||[])[1]||''}})"
    )


def png(width: int = 24, height: int = 16) -> bytes:
    """A real PNG (a red rectangle)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + b"\xc8\x28\x28" * width for _ in range(height))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


PNG = base64.b64encode(png()).decode()
SVG = (
    f'<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10" onload="{js("svg-onload")}">'
    f"<script>{js('svg-script')}</script></svg>"
)
# (mime bundle, output metadata) as a kernel can publish them: display(bundle, raw=True, metadata=...)
ATTACKS = [
    ({"text/html": f"<script>{js('html-script')}</script>"}, {}),
    ({"text/html": f'<img src=x onerror="{js("html-img")}">'}, {}),
    ({"text/html": f"<script>{js('html-isolated')}</script>"}, {"text/html": {"isolated": True}}),
    ({"application/javascript": js("javascript")}, {}),
    ({"image/svg+xml": SVG}, {}),
    ({"text/markdown": f'<img src=x onerror="{js("markdown-img")}">'}, {}),
    ({"image/png": f'x" onerror="{js("png-data")}" x="'}, {}),
    ({"image/jpeg": f'x" onerror="{js("jpeg-data")}" x="'}, {}),
    (
        {"image/png": PNG, "text/plain": "<Figure>"},  # an unquoted attribute: no quotes, no spaces
        {"image/png": {"width": "1 onload=window.__pwned=(window.__pwned||[]).concat(/png-width/.source)"}},
    ),
]
ATTACK_CELL = f"""import json
from IPython.display import display
for bundle, meta in json.loads({json.dumps(ATTACKS)!r}):
    display(bundle, raw=True, metadata=meta)
"""
# appended to an answer cell: the IPython classes a student would reach for
ANSWER_TAIL = f"""
from IPython.display import HTML, SVG, Javascript, Markdown, display
display(HTML({f"<script>{js('ipython-html')}</script><b>IPython HTML</b>"!r}))
display(Javascript({js("ipython-javascript")!r}))
display(SVG({SVG.replace("svg-", "ipython-svg-")!r}))
display(Markdown({f'<img src=x onerror="{js("ipython-markdown")}">'!r}))
"""
MARKDOWN = f"""My notes <script>{js("md-script")}</script>

<img src=x onerror="{js("md-img")}">

<details open ontoggle="{js("md-details")}"><summary>more</summary>x</details>

[a link](javascript:{js("md-link")}) and <a href="javascript:{js("md-a")}">another</a>

<iframe srcdoc="<script>{js("md-iframe")}</script>"></iframe>
"""
HONEST_CELL = f"""import base64
from IPython.display import HTML, Image, display
print("my own check: loss went down")
display(HTML('<table><tr><th>step</th><th>loss</th></tr><tr><td>0</td><td>3.31</td></tr></table>'))
display(Image(data=base64.b64decode({PNG!r})))
"""


def _submission(source_nb, release_nb, attacker: bool):
    answers = reference_answers(source_nb)
    if not attacker:
        return fill(release_nb, answers, [("ex4_train", HONEST_CELL)])  # run: before the last graded cell
    answers["ex2_solution"] += ANSWER_TAIL
    nb = fill(release_nb, answers, [("ex1_check", ATTACK_CELL)])
    at = next(
        i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == "ex1_solution"
    )
    nb.cells.insert(at, nbformat.v4.new_markdown_cell(MARKDOWN))
    nb.cells.append(
        nbformat.v4.new_raw_cell(
            f"<script>{js('raw-cell')}</script>",
            metadata={"format": "text/html", "raw_mimetype": "text/html"},
        )
    )
    return nb


@pytest.fixture(scope="module")
def course(tmp_path_factory, new_course):
    """Graded with the kit's config; the control is the attacker's notebook graded with
    NeutraliseOutputs switched off (after the others, so it is the only one affected)."""
    course = new_course(tmp_path_factory.mktemp("inert"))
    nbs = [
        nbformat.read(course / d / spec.ASSIGNMENT / f"{spec.NOTEBOOK}.ipynb", 4)
        for d in ("source", "release")
    ]
    for student in (HONEST, ATTACKER, CONTROL):
        path = course / "submitted" / student / spec.ASSIGNMENT / f"{spec.NOTEBOOK}.ipynb"
        path.parent.mkdir(parents=True)
        nbformat.write(_submission(*nbs, attacker=student != HONEST), path)
        if student == ATTACKER:
            nbgrader(course, "autograde", spec.ASSIGNMENT)
    nbgrader(
        course, "autograde", spec.ASSIGNMENT, f"--student={CONTROL}", "--NeutraliseOutputs.enabled=False"
    )
    nbgrader(course, "generate_feedback", spec.ASSIGNMENT, "--force")
    return course


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(course, tmp_path_factory):
    """A real Jupyter server with nbgrader's formgrader, in the course folder."""
    port, token = _free_port(), secrets.token_hex(16)
    config_dir = tmp_path_factory.mktemp("jupyter_config")  # no user configuration leaks in
    env = dict(
        os.environ,
        PATH=f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        JUPYTER_CONFIG_DIR=str(config_dir),
    )
    log = open(config_dir / "server.log", "w")  # noqa: SIM115 - the server writes it while it runs
    proc = subprocess.Popen(
        [
            str(VENV_BIN / "jupyter"),
            "server",
            f"--ServerApp.token={token}",
            f"--ServerApp.port={port}",
            "--ServerApp.port_retries=0",
            "--ServerApp.ip=127.0.0.1",
            "--ServerApp.open_browser=False",
            f"--ServerApp.root_dir={course}",
            "--ServerApp.allow_root=True",
        ],
        cwd=course,
        env=env,
        stdout=log,
        stderr=log,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                _api(base, token, "/api/status")
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(
                        "jupyter server did not start:\n" + (config_dir / "server.log").read_text()
                    ) from None
                time.sleep(0.2)
        yield base, token
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def _api(base: str, token: str, path: str, method: str = "GET"):
    req = urllib.request.Request(base + path, method=method, headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(req, timeout=10) as r:
        body = r.read()
    return json.loads(body) if body else None


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


def visit(browser, url: str, seconds: float = 1.5, login: str | None = None) -> dict:
    """Open `url` (after `login`, as a TA logged into Jupyter), let it settle, click every
    script link (as a curious TA would), and report each frame's marker and the page's text."""
    context = browser.new_context()
    page = context.new_page()
    # Only the page's own server: the templates' CDN scripts would only slow the test down.
    page.route(
        "**/*",
        lambda r: r.continue_() if r.request.url.startswith(("file:", "http://127.0.0.1")) else r.abort(),
    )
    try:
        if login:
            page.goto(login)  # the login cookie, for the whole server (path /)
        page.goto(url, wait_until="load", timeout=60_000)
        page.wait_for_timeout(seconds * 1000)
        clicked = 0
        for frame in page.frames:
            clicked += frame.evaluate("""() => { const links = [...document.querySelectorAll('a[href]')]
                .filter(a => a.getAttribute('href').trim().toLowerCase().startsWith('javascript:'));
                links.forEach(a => a.click()); return links.length; }""")
        page.wait_for_timeout(500)
        markers = {}
        for i, frame in enumerate(page.frames):
            markers[f"{i}:{frame.url[:40]}"] = frame.evaluate("() => window.__pwned || null")
        return {
            "markers": markers,
            "pwned": sorted({m for v in markers.values() if v for m in v}),
            "clicked": clicked,
            "text": page.inner_text("body"),
            "images": page.evaluate("() => [...document.images].filter(i => i.naturalWidth > 0).length"),
            "tables": page.evaluate("() => document.querySelectorAll('td').length"),
        }
    finally:
        context.close()


def _feedback(course: Path, student: str) -> str:
    return (course / "feedback" / student / spec.ASSIGNMENT / f"{spec.NOTEBOOK}.html").as_uri()


def _formgrader(browser, course: Path, server, student: str, **kw) -> dict:
    """The formgrader's page of `student`'s submission, seen by a TA logged in with the token."""
    base, token = server
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        sid = gb.find_submission_notebook(spec.NOTEBOOK, spec.ASSIGNMENT, student).id
    return visit(
        browser, f"{base}/formgrader/submissions/{sid}/", login=f"{base}/api/status?token={token}", **kw
    )


def _kernels(server, wait: float = 0.0) -> list:
    deadline = time.monotonic() + wait
    while True:
        kernels = _api(*server, "/api/kernels")
        if kernels or time.monotonic() >= deadline:
            return kernels
        time.sleep(0.25)


def _assert_shown(seen: dict) -> None:
    """The page really is the attacker's graded notebook, its payloads shown as text."""
    assert "PASS ex1_dlogprobs: 1/1 points" in seen["text"]
    assert "PASS ex2_dlogits" in seen["text"]
    assert "ontoggle=" in seen["text"] and "My notes <script>" in seen["text"]
    assert "[JavaScript output removed by the autograder]" in seen["text"]


def test_the_attackers_feedback_is_inert(course, browser):
    seen = visit(browser, _feedback(course, ATTACKER))
    assert seen["pwned"] == [], seen["markers"]
    assert seen["clicked"] == 0
    _assert_shown(seen)


def test_the_formgraders_view_of_the_attacker_is_inert(course, server, browser):
    assert _kernels(server) == []
    seen = _formgrader(browser, course, server, ATTACKER)
    assert seen["pwned"] == [], seen["markers"]
    assert seen["clicked"] == 0
    _assert_shown(seen)
    assert _kernels(server, wait=2) == []


@pytest.mark.parametrize("view", ["feedback", "formgrader"])
def test_the_honest_students_outputs_are_all_shown(course, server, browser, view):
    seen = (
        visit(browser, _feedback(course, HONEST), seconds=0.5)
        if view == "feedback"
        else _formgrader(browser, course, server, HONEST, seconds=0.5)
    )
    assert seen["pwned"] == []
    assert "PASS ex4_training" in seen["text"] and "my own check: loss went down" in seen["text"]
    assert seen["images"] >= 1 and seen["tables"] >= 2  # the PNG is drawn, the table is a table
    assert "output removed by the autograder" not in seen["text"]


def test_control_without_the_preprocessor_the_payloads_run(course, server, browser):
    """The same submission graded with NeutraliseOutputs off: the markers are set and a
    kernel is started, so the checks above would see an attack that got through."""
    feedback = visit(browser, _feedback(course, CONTROL))
    assert {"html-script", "html-img", "md-script", "md-img", "png-width"} <= set(feedback["pwned"])
    assert _kernels(server) == []
    graded = _formgrader(browser, course, server, CONTROL)
    assert {"html-script", "html-img", "javascript", "md-script", "md-details"} <= set(graded["pwned"])
    kernels = _kernels(server, wait=10)
    for k in kernels:
        _api(*server, f"/api/kernels/{k['id']}", method="DELETE")
    assert kernels, "the payload could not start a kernel: the kernel check would prove nothing"
