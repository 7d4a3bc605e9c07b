"""benchmarks/throughput.py's two classes: the corpus as it is, and its right answers alone
(`--right`), the class a TA mostly grades."""

from __future__ import annotations

import sys

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
from throughput import _cases  # noqa: E402

from corpus import CORPUS  # noqa: E402


def test_the_right_class_is_the_corpus_full_marks_cases_only():
    right, _ = _cases(True)
    assert right and len(right) < len(CORPUS)
    assert all(not (c.zeros or c.carried or c.suspicious) for c in right)
    assert {c.sample.student for c in right} >= {"s01_reference", "s02_vectorised"}


def test_the_default_class_is_the_whole_corpus_attacks_and_all():
    assert _cases(False)[0] == CORPUS
    assert sum(bool(c.suspicious) for c in CORPUS) == 20  # what the benchmark's docstring says
