"""A user of its own for each sandbox, when grading runs as root.

The kernel rlimit on processes (RLIMIT_NPROC) counts per user: were every sandbox `nobody`,
a fork bomb in one submission's kernel would leave no process for a classmate's replay, or
for another batch graded at the same time. So each sandbox gets a uid from a range that no
account uses, held with a lock for as long as the sandbox lives: a limit, a signal or a
file of one sandbox's user means nothing to another's.
"""

from __future__ import annotations

import fcntl
import os
import random
from dataclasses import dataclass
from pathlib import Path

from ..settings import env

FIRST_UID = env("BACKPROP_NINJA_FIRST_UID")
COUNT = env("BACKPROP_NINJA_UID_COUNT")
LOCKS = Path("/run/backprop-ninja-uids")  # root's: the leases of every grading process here


@dataclass
class Lease:
    """A uid held for one sandbox; released when closed or when the holder exits."""

    uid: int
    fd: int

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __del__(self):
        self.close()


def uid_range() -> range:
    return range(FIRST_UID, FIRST_UID + COUNT)


def _busy() -> set[int]:
    """uids that still have processes (never handed out again until they are gone)."""
    busy = set()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                busy.add(os.stat(entry.path).st_uid)
            except OSError:
                pass
    return busy


def _lock_dir() -> Path:
    LOCKS.mkdir(mode=0o700, exist_ok=True)
    st = os.lstat(LOCKS)
    if st.st_uid != 0 or not os.path.isdir(LOCKS) or os.path.islink(LOCKS):
        raise RuntimeError(f"{LOCKS} is not root's own folder")
    return LOCKS


def claim() -> Lease:
    """A free uid of the range, locked for the caller (root only)."""
    folder, busy = _lock_dir(), _busy()
    uids = list(uid_range())
    start = random.randrange(len(uids))  # concurrent graders rarely try the same one first
    for uid in uids[start:] + uids[:start]:
        if uid in busy:
            continue
        fd = os.open(folder / str(uid), os.O_CREAT | os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        return Lease(uid, fd)
    raise RuntimeError(f"no free sandbox user in {FIRST_UID}-{FIRST_UID + COUNT - 1}")
