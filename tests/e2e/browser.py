"""Helpers of the real-browser tests (test_browser.py): a real `jupyter lab` on a free port
that is always stopped, headless Debian Chromium through Playwright, and screenshots under
reports/screenshots/ (git-ignored: /reports/ in .gitignore)."""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from conftest import ROOT, VENV_BIN

CHROMIUM = "/usr/bin/chromium"  # Debian's: Playwright cannot download its own browsers here
SCREENSHOTS = ROOT / "reports" / "screenshots"

# JupyterLab settings of the test's own (temporary) user: every cell in the DOM (no windowing,
# so a locator finds a cell far down the notebook) and no news pop-up asking to fetch the web.
LAB_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false"},
}


def chromium_missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    if not os.access(CHROMIUM, os.X_OK):
        return f"{CHROMIUM} is missing (apt-get install chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright Python package is missing (pip install -e '.[test]')"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Jupyter:
    base: str  # http://127.0.0.1:<port>
    token: str
    root: Path  # the server's root_dir
    log: Path

    def url(self, path: str) -> str:
        """`path` on the server, with the token: the browser's first visit logs it in."""
        sep = "&" if "?" in path else "?"
        return f"{self.base}{path}{sep}token={self.token}"

    def api(self, path: str, method: str = "GET"):
        req = urllib.request.Request(
            self.base + path, method=method, headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(req, timeout=10) as r:
            body = r.read()
        return json.loads(body) if body else None


def _private_jupyter_dirs(home: Path, exchange: Path) -> dict[str, str]:
    """Config, data and runtime folders of the test's own, so nothing reads or writes
    ~/.jupyter or ~/.local/share/jupyter. The extensions installed in the virtualenv
    (share/jupyter/labextensions, etc/jupyter/jupyter_server_config.d: nbgrader's among them)
    stay enabled: they are found through sys.prefix, not these folders."""
    config, data, runtime, ipython = (home / d for d in ("config", "data", "runtime", "ipython"))
    for d in (config, data, runtime, ipython, exchange):
        d.mkdir(parents=True, exist_ok=True)
    for name, settings in LAB_SETTINGS.items():
        path = config / "lab" / "user-settings" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(settings))
    # nbgrader's extensions would otherwise look for /usr/local/share/nbgrader/exchange
    (config / "nbgrader_config.py").write_text(f"c = get_config()\nc.Exchange.root = {str(exchange)!r}\n")
    return {
        "JUPYTER_CONFIG_DIR": str(config),
        "JUPYTER_DATA_DIR": str(data),
        "JUPYTER_RUNTIME_DIR": str(runtime),
        "IPYTHONDIR": str(ipython),
        # named outright: one inherited from the caller's environment would win over
        # JUPYTER_CONFIG_DIR/lab/ and the settings above would not be read
        "JUPYTERLAB_SETTINGS_DIR": str(config / "lab" / "user-settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(config / "lab" / "workspaces"),
    }


def _check_lab_settings(server: Jupyter) -> None:
    """The server hands the browser the settings of LAB_SETTINGS (else a locator would look for
    cells JupyterLab never attached, and the test would fail far from the cause)."""
    for name, settings in LAB_SETTINGS.items():
        package, _, plugin_name = name.removesuffix(".jupyterlab-settings").rpartition("/")
        plugin = f"{package}:{plugin_name}"
        composite = server.api(f"/lab/api/settings/{plugin}")["settings"]
        wrong = {k: composite.get(k) for k, v in settings.items() if composite.get(k) != v}
        assert not wrong, f"jupyter lab did not read the test's settings of {plugin}: {wrong}\n{server.log}"


@contextmanager
def jupyter_lab(
    root: Path, home: Path, *, cwd: Path | None = None, timeout: float = 120
) -> Iterator[Jupyter]:
    """A real `jupyter lab` serving `root`, started in `cwd` (default `root`: nbgrader's
    extensions read the nbgrader_config.py of the folder the server starts in), on a free port
    with a random token. Waits until /api/status answers; always stops the server (and any
    kernel it started) afterwards."""
    port, token = free_port(), secrets.token_hex(16)
    home.mkdir(parents=True, exist_ok=True)
    log_path = home / "jupyter.log"
    env = dict(
        os.environ,
        PATH=f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        **_private_jupyter_dirs(home, home / "exchange"),
    )
    cmd = [
        str(VENV_BIN / "jupyter"),
        "lab",
        "--no-browser",
        f"--port={port}",
        "--ServerApp.port_retries=0",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.token={token}",
        f"--ServerApp.root_dir={root}",
        # window.jupyterapp: open_notebook() asks JupyterLab itself whether the kernel is ready
        "--LabApp.expose_app_in_browser=True",
        "--allow-root",
    ]
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            cmd, cwd=cwd or root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    server = Jupyter(f"http://127.0.0.1:{port}", token, root, log_path)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                server.api("/api/status")
                break
            except (OSError, urllib.error.URLError):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"jupyter lab did not start:\n{log_path.read_text()}") from None
                time.sleep(0.25)
        _check_lab_settings(server)
        yield server
    finally:
        _stop(proc, server)


def _stop(proc: subprocess.Popen, server: Jupyter) -> None:
    if proc.poll() is None:
        try:  # the kernels first: each runs in a session of its own
            for k in server.api("/api/kernels") or []:
                server.api(f"/api/kernels/{k['id']}", method="DELETE")
        except (OSError, urllib.error.URLError):
            pass
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    try:  # whatever is left of the process group this helper started
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


# True once JupyterLab shows the notebook `path` with `cells` cells attached to the page and its
# kernel started, connected and idle. The execution indicator alone says neither: it reads
# "idle" before the kernel is even asked for, while the first cell is the only one in the page.
_NOTEBOOK_READY = """([path, cells]) => {
    const app = window.jupyterapp;
    if (!app) return false;
    const panel = Array.from(app.shell.widgets('main')).find(w => w.context && w.context.path === path);
    if (!panel || !panel.context.isReady) return false;
    if (document.querySelectorAll('.jp-NotebookPanel .jp-Cell').length !== cells) return false;
    const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
    return !!kernel && kernel.connectionStatus === 'connected' && kernel.status === 'idle';
}"""


def open_notebook(page, server: Jupyter, path: str, cells: int, timeout: float = 180_000) -> None:
    """Open the notebook `path` of `server` in JupyterLab and wait until every one of its
    `cells` cells is in the page (JupyterLab attaches them after the first, and with windowing
    never the ones out of view) and its kernel is idle."""
    page.goto(server.url(f"/lab/tree/{path}"))
    try:
        page.wait_for_function(_NOTEBOOK_READY, arg=[path, cells], timeout=timeout, polling=250)
    except Exception as e:  # what the page had, for the failure's message
        shown, status = page.evaluate(
            """() => [document.querySelectorAll('.jp-NotebookPanel .jp-Cell').length,
                (document.querySelector('.jp-Notebook-ExecutionIndicator') || {dataset: {}})
                    .dataset.status]"""
        )
        raise AssertionError(
            f"{path} not ready in JupyterLab: {shown} of {cells} cells in the page, "
            f"execution indicator {status!r}:\n{server.log.read_text()[-3000:]}"
        ) from e


def expect_count(locator, n: int, timeout: float = 60_000) -> None:
    """`locator` matches `n` elements, waiting up to `timeout` ms for the page to get there
    (an immediate count() races the page's rendering)."""
    from playwright.sync_api import expect

    expect(locator).to_have_count(n, timeout=timeout)


@contextmanager
def chromium() -> Iterator:
    """Headless Debian Chromium driven by Playwright (as root: no sandbox)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-dev-shm-usage"]
        )
        try:
            yield browser
        finally:
            browser.close()


def local_only(page) -> None:
    """Requests off this machine are refused at once (the feedback template's MathJax CDN
    script would only slow a page down: there is no network here)."""
    local = ("file:", "http://127.0.0.1", "data:")
    page.route("**/*", lambda r: r.continue_() if r.request.url.startswith(local) else r.abort())


def screenshot(page, name: str, full_page: bool = False) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    return path


def images_loaded(page) -> list[dict]:
    """Every <img> of the page with its natural width (0: not loaded or not decodable)."""
    return page.evaluate(
        """() => [...document.images].map(i => ({
            src: i.getAttribute('src').slice(0, 40), width: i.naturalWidth, complete: i.complete }))"""
    )
