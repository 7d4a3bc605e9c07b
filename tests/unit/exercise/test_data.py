"""grader/exercise/data.py, and its verb `backprop-ninja data` (the CLI tests, as `python -m grader data`).
No internet: every URL points at 127.0.0.1."""

from __future__ import annotations

import functools
import hashlib
import http.server
import importlib.util
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from grader.exercise import data
from grader.exercise.data import (
    NAMES_SHA256,
    ChecksumMismatch,
    DownloadError,
    FallbackUnavailable,
    NamesFile,
    SourceNotFound,
    download_names,
    ensure_names,
    fallback_names,
)

REPO = Path(__file__).resolve().parents[3]
# the shared copy beside the project, or NAMES_TXT where CI's clone has none beside it (read
# here, before _isolated_env takes NAMES_TXT away from the tests)
REAL_NAMES = Path(os.environ.get("NAMES_TXT") or REPO.parent / "shared" / "names.txt")
N_LECTURE_NAMES = 32033

needs_names_pkg = pytest.mark.skipif(
    importlib.util.find_spec("names") is None,
    reason="offline fallback needs the PyPI package names==0.3.0 (pip install names==0.3.0)",
)


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch):
    # A NAMES_TXT in the developer's shell would change which branch runs,
    # and a proxy setting would send 127.0.0.1 requests elsewhere.
    monkeypatch.delenv("NAMES_TXT", raising=False)
    for var in ("no_proxy", "NO_PROXY"):
        monkeypatch.setenv(var, "127.0.0.1,localhost")


@pytest.fixture(scope="session")
def real_names() -> Path:
    if not REAL_NAMES.is_file() or sha256_of(REAL_NAMES) != NAMES_SHA256:
        pytest.skip(f"the real names.txt is needed for these tests and is absent: {REAL_NAMES}")
    return REAL_NAMES


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # keep pytest output clean
        pass


@pytest.fixture(scope="session")
def server(real_names, tmp_path_factory):
    """Base URL of a local server with names.txt and a one-byte-off modified.txt."""
    root = tmp_path_factory.mktemp("www")
    shutil.copyfile(real_names, root / "names.txt")
    (root / "modified.txt").write_bytes(modified(real_names))

    handler = functools.partial(_QuietHandler, directory=str(root))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


@pytest.fixture
def dead_url() -> str:
    """A URL on a local port nobody listens on: connections are refused at once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/names.txt"


def modified(real_names: Path) -> bytes:
    """The real file with its last byte changed: same size, wrong sha256."""
    content = real_names.read_bytes()
    return content[:-1] + (b"y" if content[-1:] != b"y" else b"z")


def lines_of(path: Path) -> list[str]:
    return path.read_text().splitlines()


def leftovers(directory: Path) -> list[Path]:
    return [p for p in directory.iterdir() if p.name.endswith(".tmp")]


# --- download_names ---------------------------------------------------------


def test_download_verifies_sha_and_has_all_names(server, tmp_path):
    dest = tmp_path / "sub" / "names.txt"
    assert download_names(dest, url=f"{server}/names.txt") == dest
    assert sha256_of(dest) == NAMES_SHA256
    names = lines_of(dest)
    assert len(names) == N_LECTURE_NAMES
    assert names[:3] == ["emma", "olivia", "ava"]
    assert leftovers(dest.parent) == []


def test_checksum_mismatch_raises_and_writes_nothing(server, tmp_path):
    dest = tmp_path / "names.txt"
    with pytest.raises(ChecksumMismatch, match=NAMES_SHA256):
        download_names(dest, url=f"{server}/modified.txt")
    assert not dest.exists()
    assert list(tmp_path.iterdir()) == []


def test_checksum_mismatch_keeps_existing_file(server, tmp_path):
    dest = tmp_path / "names.txt"
    dest.write_text("previous\n")
    with pytest.raises(ChecksumMismatch):
        download_names(dest, url=f"{server}/modified.txt")
    assert dest.read_text() == "previous\n"


def test_http_404_is_download_error(server, tmp_path):
    dest = tmp_path / "names.txt"
    with pytest.raises(DownloadError, match="404"):
        download_names(dest, url=f"{server}/no-such-file.txt")
    assert not dest.exists()


def test_unreachable_is_download_error(dead_url, tmp_path):
    dest = tmp_path / "names.txt"
    with pytest.raises(DownloadError, match=re.escape(dead_url)):
        download_names(dest, url=dead_url, timeout=5)
    assert not dest.exists()


def test_timeout_is_honoured(tmp_path):
    # A listening socket that never answers: the TCP handshake succeeds via
    # the backlog, then the HTTP response never comes.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        url = f"http://127.0.0.1:{s.getsockname()[1]}/names.txt"
        start = time.monotonic()
        with pytest.raises(DownloadError, match="timed out"):
            download_names(tmp_path / "names.txt", url=url, timeout=0.5)
        assert time.monotonic() - start < 10
    assert not (tmp_path / "names.txt").exists()


# --- fallback_names ---------------------------------------------------------


@needs_names_pkg
def test_fallback_is_thousands_of_sorted_unique_az_names(tmp_path, capsys):
    dest = fallback_names(tmp_path / "names.txt")
    names = lines_of(dest)
    assert len(names) > 3000
    assert all(re.fullmatch(r"[a-z]+", n) for n in names)
    assert names == sorted(set(names))
    assert {"emma", "olivia", "james", "mary"} <= set(names)
    assert sha256_of(dest) != NAMES_SHA256

    err = capsys.readouterr().err.splitlines()
    assert len(err) >= 3 and all(line.startswith("WARNING") for line in err)
    assert any("NOT reproduce" in line for line in err)


@needs_names_pkg
def test_fallback_is_deterministic(tmp_path):
    a = fallback_names(tmp_path / "a.txt").read_bytes()
    b = fallback_names(tmp_path / "b.txt").read_bytes()
    assert a == b


def test_fallback_without_package_is_a_clear_error(monkeypatch, tmp_path, dead_url):
    monkeypatch.setattr(data, "FALLBACK_PACKAGE", "no_such_package_for_grader_tests")
    with pytest.raises(FallbackUnavailable, match="pip install names") as info:
        ensure_names(tmp_path / "names.txt", url=dead_url, timeout=5)
    assert "download failed" in str(info.value)  # says why the fallback was needed
    assert not (tmp_path / "names.txt").exists()


# --- ensure_names -----------------------------------------------------------


def test_ensure_downloads(server, tmp_path, capsys):
    nf = ensure_names(tmp_path / "names.txt", url=f"{server}/names.txt")
    assert isinstance(nf, NamesFile)
    assert nf.origin == "download"
    assert nf.is_lecture_data()
    assert nf.n_names == N_LECTURE_NAMES
    assert nf.path == tmp_path / "names.txt"
    assert capsys.readouterr().err == ""


@needs_names_pkg
def test_ensure_falls_back_when_unreachable(dead_url, tmp_path, capsys):
    nf = ensure_names(tmp_path / "names.txt", url=dead_url, timeout=5)
    assert nf.origin == "fallback"
    assert not nf.is_lecture_data()
    assert nf.n_names == len(lines_of(nf.path)) > 3000

    err = capsys.readouterr().err
    assert err.startswith("WARNING")
    assert "download failed" in err and dead_url in err
    assert "NOT the lecture's names.txt" in err


@needs_names_pkg
def test_ensure_falls_back_on_checksum_mismatch(server, real_names, tmp_path, capsys):
    nf = ensure_names(tmp_path / "names.txt", url=f"{server}/modified.txt")
    assert nf.origin == "fallback"
    assert not nf.is_lecture_data()
    # The mismatching download must not be what ended up in dest.
    assert nf.path.read_bytes() != modified(real_names)
    assert nf.n_names != N_LECTURE_NAMES

    err = capsys.readouterr().err
    assert err.startswith("WARNING")
    assert "checksum mismatch" in err and NAMES_SHA256 in err


def test_user_source_argument(real_names, dead_url, tmp_path, capsys):
    nf = ensure_names(tmp_path / "names.txt", source=str(real_names), url=dead_url)
    assert nf.origin == "user"
    assert nf.is_lecture_data() and nf.n_names == N_LECTURE_NAMES
    assert (tmp_path / "names.txt").read_bytes() == real_names.read_bytes()
    assert capsys.readouterr().err == ""


def test_user_source_env_var(real_names, dead_url, tmp_path, monkeypatch):
    monkeypatch.setenv("NAMES_TXT", str(real_names))
    nf = ensure_names(tmp_path / "names.txt", url=dead_url)
    assert nf.origin == "user"
    assert nf.is_lecture_data()
    assert (tmp_path / "names.txt").read_bytes() == real_names.read_bytes()


def test_source_argument_beats_env_var(real_names, dead_url, tmp_path, monkeypatch):
    monkeypatch.setenv("NAMES_TXT", str(tmp_path / "missing.txt"))
    nf = ensure_names(tmp_path / "names.txt", source=real_names, url=dead_url)
    assert nf.origin == "user" and nf.is_lecture_data()


def test_user_source_same_file_as_dest(real_names, dead_url, tmp_path):
    dest = tmp_path / "names.txt"
    shutil.copyfile(real_names, dest)
    nf = ensure_names(dest, source=dest, url=dead_url)
    assert nf.origin == "user" and nf.is_lecture_data()
    assert leftovers(tmp_path) == []


def test_user_source_not_lecture_data_warns(dead_url, tmp_path, capsys):
    own = tmp_path / "own.txt"
    own.write_text("anna\nbob\n")
    nf = ensure_names(tmp_path / "names.txt", source=own, url=dead_url)
    assert nf.origin == "user" and nf.n_names == 2 and not nf.is_lecture_data()
    assert "NOT reproduce" in capsys.readouterr().err


def test_missing_user_source_argument_raises(server, tmp_path):
    missing = tmp_path / "nope" / "names.txt"
    with pytest.raises(SourceNotFound, match=re.escape(str(missing))):
        ensure_names(tmp_path / "names.txt", source=missing, url=f"{server}/names.txt")
    assert not (tmp_path / "names.txt").exists()  # no silent download either


def test_missing_user_source_env_var_raises(server, tmp_path, monkeypatch):
    missing = tmp_path / "nope.txt"
    monkeypatch.setenv("NAMES_TXT", str(missing))
    with pytest.raises(FileNotFoundError, match=r"\$NAMES_TXT"):
        ensure_names(tmp_path / "names.txt", url=f"{server}/names.txt")
    assert not (tmp_path / "names.txt").exists()


def test_cached_file_reused_without_network(real_names, dead_url, tmp_path, capsys):
    dest = tmp_path / "names.txt"
    shutil.copyfile(real_names, dest)
    before = dest.stat().st_mtime_ns
    nf = ensure_names(dest, url=dead_url, timeout=5)
    assert nf.origin == "cached"
    assert nf.is_lecture_data() and nf.n_names == N_LECTURE_NAMES
    assert dest.stat().st_mtime_ns == before
    assert capsys.readouterr().err == ""


@needs_names_pkg
def test_fallback_replaced_once_download_works(server, dead_url, tmp_path):
    dest = tmp_path / "names.txt"
    first = ensure_names(dest, url=dead_url, timeout=5)
    assert first.origin == "fallback"

    second = ensure_names(dest, url=f"{server}/names.txt")
    assert second.origin == "download"
    assert second.is_lecture_data() and sha256_of(dest) == NAMES_SHA256

    third = ensure_names(dest, url=dead_url, timeout=5)
    assert third.origin == "cached"


@needs_names_pkg
def test_fallback_replaced_by_user_source(real_names, dead_url, tmp_path):
    dest = tmp_path / "names.txt"
    assert ensure_names(dest, url=dead_url, timeout=5).origin == "fallback"
    nf = ensure_names(dest, source=real_names, url=dead_url)
    assert nf.origin == "user" and sha256_of(dest) == NAMES_SHA256


# --- CLI --------------------------------------------------------------------


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "grader", "data", *args],
        cwd=REPO,
        env=dict(os.environ),  # carries the fixture's NAMES_TXT removal and no_proxy
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.integration
def test_cli_download(server, tmp_path):
    dest = tmp_path / "names.txt"
    proc = run_cli(str(dest), "--url", f"{server}/names.txt")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "names.txt: 32033 names from download (sha256 ok)\n"
    assert sha256_of(dest) == NAMES_SHA256


@pytest.mark.integration
def test_cli_source(real_names, dead_url, tmp_path):
    proc = run_cli(str(tmp_path / "names.txt"), "--source", str(real_names), "--url", dead_url)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "names.txt: 32033 names from user (sha256 ok)\n"


@pytest.mark.integration
def test_cli_missing_source_fails_clearly(dead_url, tmp_path):
    missing = tmp_path / "missing.txt"
    proc = run_cli(str(tmp_path / "names.txt"), "--source", str(missing), "--url", dead_url)
    assert proc.returncode != 0
    assert proc.stdout == ""
    assert str(missing) in proc.stderr and "does not exist" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.integration
@needs_names_pkg
def test_cli_fallback(dead_url, tmp_path):
    proc = run_cli(str(tmp_path / "names.txt"), "--url", dead_url, "--timeout", "5")
    assert proc.returncode == 0, proc.stderr
    assert re.fullmatch(
        r"names\.txt: \d{4,} names from fallback \(sha256 differs: NOT the lecture data\)\n",
        proc.stdout,
    )
    assert proc.stderr.startswith("WARNING")
