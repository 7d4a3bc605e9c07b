"""The tests' own layout and tiers: pytest imports test modules by their file name (the test folders have
no __init__.py), so two test files of the same name in different folders stop collection."""

from __future__ import annotations

import os
import subprocess
from collections import Counter

import pytest

from conftest import ROOT, StartsAProcess


def test_test_file_names_are_unique():
    names = Counter(p.name for p in (ROOT / "tests").rglob("test_*.py"))
    assert [n for n, k in names.items() if k > 1] == []


def test_a_unit_test_cannot_start_a_process():
    """The unit tier is in-process: tests/conftest.py refuses a process to an unmarked unit test."""
    with pytest.raises(StartsAProcess):
        subprocess.run(["true"], check=True)
    with pytest.raises(StartsAProcess):
        os.fork()


@pytest.mark.integration
def test_an_integration_test_can():
    assert subprocess.run(["true"], check=True).returncode == 0
