"""A run and the pace timed around it on one core (grader/exercise/pace.py).

Linux starts a forked process on the idlest core, and two virtual cores' paces hardly agree, so
the server's pace said little of its run's: the same finite differences came out at 91 to 259
times a derived backward. Pinned, the server times the pace on the core its run then runs on
(the same cells' range then: grader/verdicts/numeric.py). The server pins itself for one request only: to the
core it is on, or to the cores of the run group that takes the request (a group keeps the cores
it was forked with, its runs too), and then gives the scheduler all of its cores back.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

_PROCESSOR = 39  # /proc/<pid>/stat's field: the core the task last ran on


def current_core() -> int | None:
    """The core this thread is on, or None where /proc does not say."""
    try:
        with open("/proc/thread-self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()  # after the command: the 3rd field on
        return int(fields[_PROCESSOR - 3])
    except (OSError, IndexError, ValueError):
        return None


@contextlib.contextmanager
def pinned(cores: set[int] | None = None) -> Iterator[None]:
    """This process (and what it forks meanwhile) on `cores`, or on the core it is on now; as
    it was afterwards. Where affinity cannot be set, nothing changes."""
    before = _pin(cores or ({core} if (core := current_core()) is not None else set()))
    try:
        yield
    finally:
        if before:
            os.sched_setaffinity(0, before)


def _pin(cores: set[int]) -> set[int] | None:
    """The affinity before, once set to `cores`; None if not set."""
    try:
        before = os.sched_getaffinity(0)
        if not cores or cores == before:
            return None
        os.sched_setaffinity(0, cores)
        return before
    except OSError:
        return None
