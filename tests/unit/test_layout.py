"""The tests' own layout: pytest imports test modules by their file name (the test folders have
no __init__.py), so two test files of the same name in different folders stop collection."""

from __future__ import annotations

from collections import Counter

from conftest import ROOT


def test_test_file_names_are_unique():
    names = Counter(p.name for p in (ROOT / "tests").rglob("test_*.py"))
    assert [n for n, k in names.items() if k > 1] == []
