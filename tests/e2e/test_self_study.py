"""The release notebook as a student on their own runs it (issue 20): a Jupyter kernel in a
fresh virtualenv holding only torch, Jupyter's kernel and matplotlib with what they need (no
nbgrader, no kit, no sandbox: their files linked from the suite's, not downloaded again), a
folder holding the notebook and nothing else. The data cell fetches names.txt from a server on
127.0.0.1 standing in for the makemore repository, refuses a file whose checksum differs, and
offline says what to download and where; then the notebook, answered with the lecture's
solutions, runs top to bottom, its short run shortened for the suite (the real short run's
time is a benchmark's)."""

from __future__ import annotations

import functools
import hashlib
import http.server
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
from importlib import metadata
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from packaging.markers import Marker

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


STUDENT_NEEDS = ("torch", "ipykernel", "matplotlib")  # what the README tells a student to install


def _needed(names) -> set[str]:
    """The installed distributions `names` require, themselves included (their extras left out)."""
    seen, todo = {}, list(names)
    while todo:
        name = re.split(r"[ <>=!~;\[(]", todo.pop().strip(), maxsplit=1)[0]
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key in seen:
            continue
        try:
            seen[key] = dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        for req in dist.requires or []:
            _, _, marker = req.partition(";")
            if not marker or ("extra" not in marker and Marker(marker).evaluate()):
                todo.append(req)
    return seen


@pytest.fixture(scope="module")
def student_kernel(tmp_path_factory):
    """A kernel spec ("student") for a fresh virtualenv's Python holding only STUDENT_NEEDS and
    what they require, each file a hard link to this virtualenv's: (the kernel's name, the venv)."""
    root = tmp_path_factory.mktemp("student_env")
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True, timeout=300
    )
    python = root / "venv" / "bin" / "python"
    where = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = Path(subprocess.run([str(python), "-c", where], capture_output=True, text=True).stdout.strip())
    for dist in _needed(STUDENT_NEEDS).values():
        for f in dist.files or []:
            src = Path(dist.locate_file(f))
            if ".." in f.parts or not src.is_file():
                continue  # scripts in bin/, byte code never written
            (site / f).parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(src, site / f)
            except OSError:
                shutil.copy2(src, site / f)
    spec_dir = root / "jupyter" / "kernels" / "student"
    spec_dir.mkdir(parents=True)
    argv = [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec_dir / "kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": "student", "language": "python"})
    )
    found = (
        "import importlib.util as u; print([m for m in ('grader', 'nbgrader', 'nbformat') if u.find_spec(m)])"
    )
    alone = subprocess.run([str(python), "-c", found], capture_output=True, text=True, cwd=root, timeout=120)
    assert alone.stdout.strip() == "[]", alone.stdout + alone.stderr  # only what a student installs
    before = os.environ.get("JUPYTER_PATH")
    os.environ["JUPYTER_PATH"] = os.pathsep.join([str(root / "jupyter"), before or ""])
    yield "student", root / "venv"
    if before is None:
        os.environ.pop("JUPYTER_PATH", None)
    else:
        os.environ["JUPYTER_PATH"] = before


def _client(nb, folder, kernel, **kw) -> NotebookClient:
    """The student's kernel in `folder`; it inherits this process's environment (no NBGRADER_EXECUTION)."""
    return NotebookClient(
        nb, kernel_name=kernel, resources={"metadata": {"path": str(folder)}}, timeout=300, **kw
    )


def _text(cell) -> str:
    out = []
    for o in cell.outputs:
        out.append(o.get("text", "") if o.output_type == "stream" else "")
        if o.output_type == "error":
            out.append(f"{o.ename}: {o.evalue}")
    return "".join(out)


def test_the_data_cell_downloads_checks_and_explains(makemore, student_kernel, tmp_path, monkeypatch):
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    folder = tmp_path / "study"
    folder.mkdir()
    release = nbformat.read(ROOT / "release" / NB, 4)
    cells = {c.metadata.nbgrader.grade_id: c for c in release.cells}
    client = _client(release, folder, student_kernel[0], allow_errors=True)

    def run_with(url):
        setting = nbformat.v4.new_code_cell(f"import os\nos.environ['NAMES_TXT_URL'] = {url!r}")
        client.execute_cell(setting, 0)
        cell = nbformat.v4.new_code_cell(cells["data_read"].source)
        client.execute_cell(cell, 1)
        return _text(cell)

    with client.setup_kernel():
        where = nbformat.v4.new_code_cell("import sys; print(sys.prefix)")
        client.execute_cell(where, 0)
        assert _text(where).strip() == str(student_kernel[1])  # the student's Python, not the suite's
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


def test_the_answered_notebook_runs_top_to_bottom_on_its_own(makemore, student_kernel, tmp_path, monkeypatch):
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
    client = _client(nb, folder, student_kernel[0])
    client.execute()  # raises on the first cell that fails
    out = "\n".join(_text(c) for c in nb.cells if c.cell_type == "code")
    assert "32033" in out and "      0/    300:" in out  # fetched, then the short run trained
    assert (folder / "names.txt").exists()
