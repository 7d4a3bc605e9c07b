"""Obtain makemore's `names.txt` (32,033 lowercase names, one a line).

Order of preference:

1. a file the user points at (`source=` or the `NAMES_TXT` environment
   variable); a missing file is an error, never a silent fall-through;
2. a download from `NAMES_URL`, accepted only if its sha256 is `NAMES_SHA256`;
3. an offline substitute built from the PyPI package `names` (census first
   names), announced with a loud warning because the lecture's numbers will
   not reproduce with it.

CLI: `backprop-ninja data DEST [--source PATH] [--url URL] [--timeout S]`.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import re
import sys
import tempfile
import urllib.request
from dataclasses import dataclass
from http.client import HTTPException
from pathlib import Path

NAMES_URL = "https://raw.githubusercontent.com/karpathy/makemore/master/names.txt"
NAMES_SHA256 = "0a30b5557f192f32ab962680889aac5f6fda0f4cecf40a6d0b5694f58ea8cc4d"
ENV_VAR = "NAMES_TXT"
FALLBACK_PACKAGE = "names"  # PyPI `names` 0.3.0; ships census files dist.*.first

_LOWER_AZ = re.compile(r"[a-z]+")


class DataError(Exception):
    """Base class for every failure to obtain names.txt."""


class SourceNotFound(DataError, FileNotFoundError):
    """The user named a names.txt that does not exist."""


class DownloadError(DataError):
    """The download did not complete (network, HTTP status, timeout, bad URL)."""


class ChecksumMismatch(DataError):
    """The download completed but is not the expected file."""


class FallbackUnavailable(DataError):
    """The offline substitute cannot be built (package `names` missing)."""


@dataclass
class NamesFile:
    path: Path
    origin: str  # "user", "download", "cached", "fallback"
    sha256: str
    n_names: int

    def is_lecture_data(self) -> bool:
        return self.sha256 == NAMES_SHA256


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _describe(path: Path, origin: str) -> NamesFile:
    data = path.read_bytes()
    n = sum(1 for line in data.splitlines() if line.strip())
    return NamesFile(path=path, origin=origin, sha256=_sha256(data), n_names=n)


def _atomic_write(dest: Path, data: bytes) -> None:
    # Temp file in the same directory so os.replace is a rename on one file
    # system: readers see the old file or the new one, never half of one.
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; a data file should be readable
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def download_names(
    dest: Path,
    *,
    url: str = NAMES_URL,
    sha256: str = NAMES_SHA256,
    timeout: float = 20.0,
) -> Path:
    """Download `url` to `dest` if its sha256 matches; return `dest`.

    Raises DownloadError if the transfer fails and ChecksumMismatch if the
    content is wrong; in both cases `dest` is left as it was.
    """
    dest = Path(dest)
    request = urllib.request.Request(url, headers={"User-Agent": "grader-kit"})
    try:
        # The timeout bounds each blocking socket operation, so a stalled
        # server fails in about `timeout` seconds instead of hanging a class.
        with urllib.request.urlopen(request, timeout=timeout) as response:
            data = response.read()
    except (OSError, HTTPException, ValueError) as e:  # URLError/timeouts are OSError
        raise DownloadError(f"could not download {url}: {e}") from e

    got = _sha256(data)
    if got != sha256:
        raise ChecksumMismatch(
            f"{url} gave a file with sha256 {got} ({len(data)} bytes), "
            f"expected {sha256}; {dest} was not written"
        )
    _atomic_write(dest, data)
    return dest


def _census_files() -> list[Path]:
    # find_spec rather than import: we only need the package's data files.
    spec = importlib.util.find_spec(FALLBACK_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec else []
    files = sorted(f for loc in locations for f in Path(loc).glob("dist.*.first"))
    if not files:
        raise FallbackUnavailable(
            f"the offline fallback needs the PyPI package `{FALLBACK_PACKAGE}` "
            f"(pip install names==0.3.0), and it is not installed"
        )
    return files


def _warn_fallback(reason: str | None, n_names: int) -> None:
    lines = [
        "WARNING: using a SUBSTITUTE names list, NOT the lecture's names.txt.",
        f"WARNING: reason: {reason}" if reason else None,
        f"WARNING: it holds {n_names} US-census first names from the PyPI package "
        f"`{FALLBACK_PACKAGE}`, not makemore's 32033 names.",
        "WARNING: the lecture's numbers (losses, counts, samples) will NOT reproduce.",
        f"WARNING: to fix it, get {NAMES_URL}",
        f"WARNING: and set {ENV_VAR}=/path/to/names.txt, or run again when online.",
    ]
    print("\n".join(line for line in lines if line), file=sys.stderr, flush=True)


def fallback_names(dest: Path, *, reason: str | None = None) -> Path:
    """Write a substitute names list to `dest` from census first names.

    Always warns on stderr (with `reason` if given): this is not the
    lecture's data set.
    """
    dest = Path(dest)
    names: set[str] = set()
    for census in _census_files():
        # Latin-1 never fails to decode; non a-z names are dropped below anyway.
        for line in census.read_text(encoding="latin-1").splitlines():
            fields = line.split()
            if fields and _LOWER_AZ.fullmatch(name := fields[0].lower()):
                names.add(name)
    _atomic_write(dest, ("\n".join(sorted(names)) + "\n").encode("ascii"))
    _warn_fallback(reason, len(names))
    return dest


def _user_source(source: str | os.PathLike | None) -> tuple[Path, str] | None:
    if source is not None:
        return Path(source).expanduser(), "source argument"
    # An empty variable counts as unset: `NAMES_TXT= cmd` should not be an error.
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser(), f"${ENV_VAR}"
    return None


def ensure_names(
    dest: Path,
    *,
    source: str | os.PathLike | None = None,
    url: str = NAMES_URL,
    timeout: float = 20.0,
) -> NamesFile:
    """Make sure `dest` holds a names list and say where it came from.

    `source` (or $NAMES_TXT) wins and must exist. Otherwise a `dest` that
    already is the lecture file is kept; anything else there (e.g. an earlier
    fallback) is replaced by a download, or by the fallback if that fails.
    """
    dest = Path(dest)

    user = _user_source(source)
    if user is not None:
        src, how = user
        if not src.is_file():
            raise SourceNotFound(f"names.txt given by {how} does not exist or is not a file: {src}")
        if not (dest.exists() and os.path.samefile(src, dest)):
            _atomic_write(dest, src.read_bytes())
        nf = _describe(dest, "user")
        if not nf.is_lecture_data():
            # The user's choice is respected, but they should know why numbers differ.
            print(
                f"WARNING: {src} is not the lecture's names.txt (sha256 {nf.sha256});\n"
                "WARNING: the lecture's numbers (losses, counts, samples) will NOT reproduce.",
                file=sys.stderr,
                flush=True,
            )
        return nf

    if dest.is_file() and _sha256(dest.read_bytes()) == NAMES_SHA256:
        return _describe(dest, "cached")

    try:
        download_names(dest, url=url, timeout=timeout)
        return _describe(dest, "download")
    except ChecksumMismatch as e:
        reason = f"checksum mismatch: {e}"
    except DownloadError as e:
        reason = f"download failed: {e}"

    try:
        fallback_names(dest, reason=reason)
    except FallbackUnavailable as e:
        raise FallbackUnavailable(f"{reason}; and {e}") from e
    return _describe(dest, "fallback")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="backprop-ninja data",
        description="Obtain makemore's names.txt (user path, download, or offline fallback).",
    )
    parser.add_argument("dest", type=Path, help="where to put names.txt")
    parser.add_argument("--source", help=f"use this names.txt (default: ${ENV_VAR})")
    parser.add_argument("--url", default=NAMES_URL, help="download URL (default: %(default)s)")
    parser.add_argument("--timeout", type=float, default=20.0, help="seconds (default: %(default)s)")
    args = parser.parse_args(argv)

    try:
        nf = ensure_names(args.dest, source=args.source, url=args.url, timeout=args.timeout)
    except DataError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    check = "sha256 ok" if nf.is_lecture_data() else "sha256 differs: NOT the lecture data"
    print(f"{nf.path.name}: {nf.n_names} names from {nf.origin} ({check})")
    return 0
