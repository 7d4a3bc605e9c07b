"""The release notebook as a student on their own runs it (issue 20): a plain Jupyter kernel
(the virtualenv's python3, no nbgrader, no sandbox), a folder holding the notebook and nothing
else. The data cell fetches names.txt from a server on 127.0.0.1 standing in for the makemore
repository, refuses a file whose checksum differs, and offline says what to download and where;
then the notebook, answered with the lecture's solutions, runs top to bottom outside the
grader, its short run shortened for the suite (the real short run's time is a benchmark's)."""

from __future__ import annotations

import functools
import hashlib
import http.server
import shutil
import socket
import threading

import nbformat
import pytest
from nbclient import NotebookClient

from grader.exercise import data, spec
from grader.incoming.submissions import Sample

from conftest import ROOT

NB = f"{spec.ASSIGNMENT}/{spec.NOTEBOOK}.ipynb"


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):
        pass


@pytest.fixture(scope="module")
def makemore(names_txt, tmp_path_factory):
    """A stand-in for the makemore repository: names.txt, and a copy one byte off."""
    root = tmp_path_factory.mktemp("makemore")
    shutil.copyfile(names_txt, root / "names.txt")
    content = bytearray(names_txt.read_bytes())
    content[-2] ^= 1
    (root / "modified.txt").write_bytes(bytes(content))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def _dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/names.txt"


def _client(nb, folder, **kw) -> NotebookClient:
    """A plain kernel in `folder`; it inherits this process's environment (no NBGRADER_EXECUTION)."""
    return NotebookClient(
        nb, kernel_name="python3", resources={"metadata": {"path": str(folder)}}, timeout=300, **kw
    )


def _text(cell) -> str:
    out = []
    for o in cell.outputs:
        out.append(o.get("text", "") if o.output_type == "stream" else "")
        if o.output_type == "error":
            out.append(f"{o.ename}: {o.evalue}")
    return "".join(out)


def test_the_data_cell_downloads_checks_and_explains(makemore, tmp_path, monkeypatch):
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    folder = tmp_path / "study"
    folder.mkdir()
    release = nbformat.read(ROOT / "release" / NB, 4)
    cells = {c.metadata.nbgrader.grade_id: c for c in release.cells}
    client = _client(release, folder, allow_errors=True)

    def run_with(url):
        setting = nbformat.v4.new_code_cell(f"import os\nos.environ['NAMES_TXT_URL'] = {url!r}")
        client.execute_cell(setting, 0)
        cell = nbformat.v4.new_code_cell(cells["data_read"].source)
        client.execute_cell(cell, 1)
        return _text(cell)

    with client.setup_kernel():
        client.execute_cell(cells["imports"], 0)
        offline = run_with(_dead_url())
        assert "FileNotFoundError: names.txt is not in" in offline and "could not be downloaded" in offline
        assert "put it in that folder, and run this cell again" in offline
        assert not (folder / "names.txt").exists()
        wrong = run_with(f"{makemore}/modified.txt")
        assert "is not the lecture's names.txt (its sha256 differs): nothing was saved" in wrong
        assert not (folder / "names.txt").exists()
        fetched = run_with(f"{makemore}/names.txt")
        assert fetched.splitlines()[0] == "32033", fetched
        assert hashlib.sha256((folder / "names.txt").read_bytes()).hexdigest() == data.NAMES_SHA256


def test_the_answered_notebook_runs_top_to_bottom_on_its_own(makemore, tmp_path, monkeypatch):
    """The reference answers in the release, run as a student runs them: every cell, no error."""
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    monkeypatch.setenv("NAMES_TXT_URL", f"{makemore}/names.txt")  # the kernel inherits it
    source, release = (nbformat.read(ROOT / d / NB, 4) for d in ("source", "release"))
    nb = Sample("self_study", "the lecture's answers", {}).notebook(source_nb=source, release_nb=release)
    train = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "ex4_train")
    assert "else 20000" in train.source
    train.source = train.source.replace("else 20000", "else 300")  # the suite's budget, not a student's
    folder = tmp_path / "study"
    folder.mkdir()
    client = _client(nb, folder)
    client.execute()  # raises on the first cell that fails
    out = "\n".join(_text(c) for c in nb.cells if c.cell_type == "code")
    assert "32033" in out and "      0/    300:" in out  # fetched, then the short run trained
    assert (folder / "names.txt").exists()
