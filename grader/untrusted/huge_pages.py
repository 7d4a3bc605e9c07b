"""Once, in the warm replay server before its first run: its anonymous memory folded onto huge
pages (MADV_COLLAPSE, Linux 6.1). Every run is a fork, which copies the server's page table and
tears its own down when it ends: an entry for each 4 kB page, one for each 2 MB one. glibc puts
its heap on huge pages (bwrap.py's GLIBC_TUNABLES), but Python's object arenas and torch's larger
buffers are mappings of their own, 4 kB pages where THP is given only on request: about 90 MB,
23,000 entries a fork, of a server's 200 MB. Collapsed, 36 MB of it is left on 4 kB pages.

Not in the kernel server: a kernel lives longer and writes much of what it inherits, and every
huge page it writes to is split back for it; measured, it saved nothing there."""

from __future__ import annotations

import ctypes

MADV_COLLAPSE = 25  # <linux/mman.h>
HUGE = 2 << 20

_libc = ctypes.CDLL(None, use_errno=True)
_libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]


def private_anonymous() -> list[tuple[int, int]]:
    """(start, end) of each private, writable mapping of no file (the heap included)."""
    spans = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            perms, path = fields[1], (fields[5] if len(fields) > 5 else "")
            if perms.startswith("rw") and perms[3] == "p" and path in ("", "[heap]"):
                start, end = (int(x, 16) for x in fields[0].split("-"))
                spans.append((start, end))
    return spans


def collapse(spans: list[tuple[int, int]] | None = None) -> int:
    """Each whole, aligned 2 MB of those mappings (or of `spans`) asked to be one huge page; how
    many the kernel took. Best effort: a kernel without MADV_COLLAPSE, or THP "never", refuses,
    and nothing changes (a range with nothing in it is refused too)."""
    taken = 0
    for start, end in private_anonymous() if spans is None else spans:
        low, high = -(-start // HUGE) * HUGE, end // HUGE * HUGE
        if high > low and _libc.madvise(low, high - low, MADV_COLLAPSE) == 0:
            taken += (high - low) // HUGE
    return taken
