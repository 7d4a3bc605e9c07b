"""A time limit on the judge's own checks of one submission, so that no submission (a value
crafted to make a comparison slow, say) can hold up the batch."""

from __future__ import annotations

import contextlib
import signal
import threading
import time


class JudgeTimeout(BaseException):
    """The judge's own checks of one submission ran out of time (a BaseException, so that no
    `except Exception` in the verdict code can swallow it)."""


@contextlib.contextmanager
def time_limit(seconds: float | None):
    """Raise JudgeTimeout in the block after `seconds` (SIGALRM). Signals reach the main thread
    only: elsewhere the block runs without a limit."""
    if not seconds or seconds <= 0 or threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_alarm(signum, frame):
        raise JudgeTimeout(
            f"the judge's own checks of this submission took over {seconds:g} s: "
            "every grade is 0 (re-grade it on a less busy machine if that is wrong)"
        )

    previous = signal.signal(signal.SIGALRM, on_alarm)
    outer, _ = signal.setitimer(signal.ITIMER_REAL, seconds)
    start = time.monotonic()
    try:
        yield
    finally:
        try:
            signal.setitimer(signal.ITIMER_REAL, 0)
        finally:  # even if the alarm fired just now
            signal.signal(signal.SIGALRM, previous)
            if outer:  # a timer of the caller's was running: give back what is left of it
                signal.setitimer(signal.ITIMER_REAL, max(outer - (time.monotonic() - start), 1e-3))
