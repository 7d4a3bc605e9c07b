"""grader/verdicts/time_limit.py: the judge's own checks of one submission are bounded (SIGALRM),
and a caller's timer survives the limit."""

from __future__ import annotations

import signal

import pytest

from grader.verdicts.time_limit import JudgeTimeout, time_limit


def test_time_limit_raises_and_restores():
    previous = signal.getsignal(signal.SIGALRM)
    with pytest.raises(JudgeTimeout), time_limit(0.2):
        while True:
            pass
    assert signal.getsignal(signal.SIGALRM) is previous
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    with time_limit(5):
        pass
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_time_limit_gives_back_an_outer_timer():
    fired = []
    old = signal.signal(signal.SIGALRM, lambda *a: fired.append(1))
    try:
        signal.setitimer(signal.ITIMER_REAL, 30)
        with time_limit(1):
            pass
        left, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 28 < left <= 30 and not fired
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
