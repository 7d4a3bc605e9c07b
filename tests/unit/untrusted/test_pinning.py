"""grader/untrusted/pinning.py: a process pinned for one request, to the core it is on or to the
cores given, what it forks meanwhile with it, and its cores given back afterwards."""

from __future__ import annotations

import os

import pytest

from grader.untrusted.pinning import current_core, pinned


def test_the_current_core_is_one_this_process_may_run_on():
    assert current_core() in os.sched_getaffinity(0)


def _childs_cores() -> set[int]:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.write(w, ",".join(map(str, sorted(os.sched_getaffinity(0)))).encode())
        os._exit(0)
    os.close(w)
    data = os.read(r, 4096).decode()
    os.close(r)
    os.waitpid(pid, 0)
    return {int(c) for c in data.split(",")}


@pytest.mark.integration  # forks
def test_pinned_to_where_it_is_and_what_it_forks_too_then_given_back():
    before = os.sched_getaffinity(0)
    with pinned():
        here = os.sched_getaffinity(0)
        assert len(here) == 1 and here <= before
        assert _childs_cores() == here
    assert os.sched_getaffinity(0) == before


@pytest.mark.integration
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one core: nothing to choose")
def test_pinned_to_the_cores_given():
    before = os.sched_getaffinity(0)
    last = {max(before)}
    with pinned(last):
        assert os.sched_getaffinity(0) == last and _childs_cores() == last
    assert os.sched_getaffinity(0) == before


def test_cores_that_cannot_be_had_change_nothing():
    before = os.sched_getaffinity(0)
    with pinned({10**6}):
        assert os.sched_getaffinity(0) == before
    assert os.sched_getaffinity(0) == before


def test_the_cores_come_back_when_the_body_raises():
    before = os.sched_getaffinity(0)
    with pytest.raises(KeyError), pinned():
        raise KeyError("the run")
    assert os.sched_getaffinity(0) == before
