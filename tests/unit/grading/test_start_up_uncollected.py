"""grader/grading/nbgrader_main.py's start_up_uncollected: no cyclic garbage collection while a
grading process imports, then what it imported frozen out of every later collection."""

from __future__ import annotations

import gc
import weakref

import pytest

from grader.grading.nbgrader_main import start_up_uncollected


@pytest.fixture
def collector():
    was = gc.isenabled()
    yield
    gc.unfreeze()  # this test process's objects back where the collector sees them
    if was:
        gc.enable()
    else:
        gc.disable()


class _Node:
    pass


def _cycle() -> weakref.ref:
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    return weakref.ref(a)


def test_nothing_is_collected_while_importing_and_the_imported_is_frozen_after(collector):
    gc.enable()
    frozen = gc.get_freeze_count()
    with start_up_uncollected():
        assert not gc.isenabled()
        kept = [_Node() for _ in range(1000)]
        gc.collect(0)  # an explicit collection still runs; no automatic one does
        assert not gc.isenabled()
    assert gc.isenabled()
    assert gc.get_freeze_count() >= frozen + len(kept)
    # what comes after is collected as before: a cycle made now is gone at the next collection
    ref = _cycle()
    assert ref() is not None
    gc.collect()
    assert ref() is None


def test_a_collector_that_was_off_stays_off(collector):
    gc.disable()
    with start_up_uncollected():
        pass
    assert not gc.isenabled()


def test_the_collector_comes_back_when_an_import_fails(collector):
    gc.enable()
    with pytest.raises(ImportError), start_up_uncollected():
        import grader.no_such_module  # noqa: F401
    assert gc.isenabled()
