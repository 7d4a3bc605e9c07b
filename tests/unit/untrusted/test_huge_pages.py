"""grader/untrusted/huge_pages.py: a warm replay server's anonymous memory on huge pages, so that
each run's fork copies (and its end tears down) a few entries where it was thousands."""

from __future__ import annotations

import ctypes
import mmap
import os
import re
from pathlib import Path

import nbformat
import pytest

from grader.confine import bwrap_works
from grader.exercise import spec
from grader.replay.client import ReplayServer, launch_sandboxed
from grader.replay.plan import replay_cells, warm_prefix
from grader.settings import JudgeSettings
from grader.untrusted import huge_pages

from conftest import JUDGE_SEED, ROOT, descendants

THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")
KERNEL = tuple(int(x) for x in re.findall(r"\d+", os.uname().release)[:2])
no_thp = pytest.mark.skipif(
    not THP.exists() or "[never]" in THP.read_text() or KERNEL < (6, 1),
    reason="no transparent huge pages, or a kernel before MADV_COLLAPSE (Linux 6.1)",
)


def _collapse_failures() -> int:
    """How often this host's kernel found no free huge page to collapse into (/proc/vmstat)."""
    for line in Path("/proc/vmstat").read_text().splitlines():
        if line.startswith("thp_collapse_alloc_failed "):
            return int(line.split()[1])
    return 0


def _unless_no_free_huge_pages(ok: bool, failures_before: int, seen) -> None:
    """A fragmented host may have no 2 MB page free to give: that is no fault of the kit's."""
    if not ok and _collapse_failures() > failures_before:
        pytest.skip(f"the host had no free huge pages to collapse into ({seen})")
    assert ok, seen


def _huge_kb(start: int) -> int:
    """kB on huge pages of the mapping that holds `start` (smaps)."""
    lines = Path("/proc/self/smaps").read_text().splitlines()
    for i, line in enumerate(lines):
        span = line.split(" ")[0]
        if "-" in span and ":" not in span:
            lo, hi = (int(x, 16) for x in span.split("-"))
            if lo <= start < hi:
                block = lines[i + 1 : i + 40]
                return next(int(b.split()[1]) for b in block if b.startswith("AnonHugePages:"))
    raise AssertionError(f"no mapping holds {start:x}")


@no_thp
def test_collapse_puts_a_written_mapping_on_huge_pages():
    m = mmap.mmap(-1, 16 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    try:
        m.write(b"x" * (16 << 20))
        buf = ctypes.c_char.from_buffer(m)
        start = ctypes.addressof(buf)
        assert any(a <= start < b for a, b in huge_pages.private_anonymous())
        if _huge_kb(start):
            pytest.skip("this host gives every mapping huge pages (THP 'always'): nothing to collapse")
        failures = _collapse_failures()
        taken = huge_pages.collapse([(start, start + (16 << 20))])
        ok = taken >= 7 and _huge_kb(start) >= 14 << 10
        _unless_no_free_huge_pages(ok, failures, (taken, _huge_kb(start)))
        assert m[: 1 << 20] == b"x" * (1 << 20) and m[-1:] == b"x"  # the same bytes, moved
    finally:
        del buf
        m.close()


def test_a_mapping_of_a_file_or_a_read_only_one_is_left_alone():
    spans = huge_pages.private_anonymous()
    assert spans, "a Python has a heap and arenas"
    maps = Path("/proc/self/maps").read_text().splitlines()
    kept = {(int(a, 16), int(b, 16)) for a, b in (line.split()[0].split("-") for line in maps)}
    assert set(spans) <= kept
    left = [line for line in maps if len(line.split()) > 5 and line.split()[5].startswith("/")]
    left += [line for line in maps if not line.split()[1].startswith("rw")]
    assert left, "a Python maps files, and read-only memory"
    for line in left:
        a, b = (int(x, 16) for x in line.split()[0].split("-"))
        assert (a, b) not in spans, line


def _server_pid(launcher_pid: int) -> int:
    """The replay server's Python under bubblewrap's processes (it has said it is ready)."""
    for pid in descendants(launcher_pid):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"grader.untrusted.server" in argv and not argv[0].endswith(b"bwrap"):
            return pid
    raise AssertionError(f"no replay server under {launcher_pid}")


@no_thp
@pytest.mark.integration
@pytest.mark.skipif(not bwrap_works(), reason="bubblewrap cannot start here")
def test_a_sandboxed_warm_replay_server_is_mostly_on_huge_pages(names_txt):
    """glibc's heap was on huge pages before (bwrap.py); Python's arenas and torch's buffers,
    mappings of their own, were not: 2 MB of them at most, where now tens of MB are."""
    nb = nbformat.read(ROOT / "release" / spec.ASSIGNMENT / f"{spec.NOTEBOOK}.ipynb", 4)
    prefix = warm_prefix(replay_cells(nb.cells, JudgeSettings(seed=JUDGE_SEED)))
    server, failures = ReplayServer(prefix, launch_sandboxed), _collapse_failures()
    try:
        server._start({"names.txt": names_txt})
        rows, block = [], None
        for line in Path(f"/proc/{_server_pid(server.proc.pid)}/smaps").read_text().splitlines():
            fields = line.split()
            if "-" in fields[0] and ":" not in fields[0]:
                block = {"name": fields[5] if len(fields) > 5 else "", "perms": fields[1]}
                rows.append(block)
            elif fields[0] in ("Anonymous:", "AnonHugePages:"):
                block[fields[0]] = int(fields[1])
    finally:
        server.close()
    outside_heap = sum(r.get("AnonHugePages:", 0) for r in rows if r["name"] != "[heap]")
    anonymous = sum(r.get("Anonymous:", 0) for r in rows)
    huge = sum(r.get("AnonHugePages:", 0) for r in rows)
    ok = outside_heap >= 8 << 10 and huge >= 0.7 * anonymous
    _unless_no_free_huge_pages(ok, failures, (outside_heap, huge, anonymous))
