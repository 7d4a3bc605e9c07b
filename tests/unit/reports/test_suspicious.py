"""grader/reports/suspicious.py in-process, on fake replay records: reports/suspicious.json is one
list, an entry per sign (a student, or two for a similar pair), grouped by student when printed."""

from __future__ import annotations

import json
import sys
import types
from dataclasses import dataclass

import pytest

from grader.exercise import spec
from grader.reports import suspicious
from grader.reports.suspicious import Entry, by_student, collect_findings, main

EX1 = [g.grade_id for g in spec.GRADED if g.exercise == 1]
GRAD = "ex1_solution, line 1: reads .grad: dlogprobs = logprobs.grad"
CTYPES = "ex2_solution, line 1: imports ctypes: import ctypes"


@dataclass
class _Pair:  # what grader/reports/similarity.py's similar_pairs returns
    students: tuple[str, str]
    evidence: str
    grade_ids: list[str]
    kind: str = "similar"


@pytest.fixture(autouse=True)
def pairs(monkeypatch):
    """A stand-in for grader/reports/similarity.py, whether or not it exists yet."""
    found: list[_Pair] = []
    fake = types.ModuleType("grader.reports.similarity")
    fake.similar_pairs = lambda course, **bounds: list(found)
    monkeypatch.setitem(sys.modules, "grader.reports.similarity", fake)
    return found


def _record(student, flags=None, score=10.0):
    record = {"student": student, "score": score, "max_score": 40.0, "findings": [], "verdicts": {}}
    if flags is not None:
        record["flags"] = flags
    return record


@pytest.fixture
def course(tmp_path):
    replay = tmp_path / "reports" / "replay"
    replay.mkdir(parents=True)
    kernel = [{"kind": "kernel", "evidence": f"{g} matched autograd ...", "grade_ids": [g]} for g in EX1[:3]]
    records = [
        _record("alice"),  # nothing to report
        _record("bob", [{"kind": "autograd", "evidence": GRAD, "grade_ids": EX1}], score=0.0),
        _record("carol", [{"kind": "tampering", "evidence": "torch.allclose", "grade_ids": EX1}, *kernel]),
        _record("dave", [{"kind": "tampering", "evidence": CTYPES, "grade_ids": ["ex2_dlogits"]}]),
        _record("erin", []),  # nothing to report either
    ]
    for r in records:
        (replay / f"{r['student']}.json").write_text(json.dumps(r))
    (replay / "broken.json").write_text('{"student": ')  # half-written: skipped
    return tmp_path


def test_one_entry_per_sign_and_none_for_the_honest(course):
    entries = collect_findings(course)
    assert [(e.students, e.kind) for e in entries] == [
        (["bob"], "autograd"),
        (["carol"], "tampering"),
        (["carol"], "kernel"),  # the kernel's passes, one entry for all of them
        (["dave"], "tampering"),
    ]
    assert entries[0] == Entry(["bob"], "autograd", GRAD, EX1)
    assert entries[2].grade_ids == EX1[:3] and "3 values matched autograd" in entries[2].evidence
    assert entries[3] == Entry(["dave"], "tampering", CTYPES, ["ex2_dlogits"])
    assert "alice" not in by_student(entries)


def test_similar_pairs_join_the_list(course, pairs):
    pairs.append(_Pair(("alice", "bob"), "82% alike\nex1 3 | ex1 3", ["ex1_dW1"]))
    entries = collect_findings(course)
    assert entries[-1] == Entry(["alice", "bob"], "similar", "82% alike\nex1 3 | ex1 3", ["ex1_dW1"])
    grouped = by_student(entries)
    assert [e.kind for e in grouped["alice"]] == ["similar"]
    assert [e.kind for e in grouped["bob"]] == ["autograd", "similar"]


def test_the_file_is_a_list_and_the_command_prints_by_student(course, pairs, capsys):
    pairs.append(_Pair(("alice", "bob"), "82% alike\nline one | line one", ["ex1_dW1"]))
    assert main([str(course)]) == 0
    listed = json.loads((course / "reports" / "suspicious.json").read_text())
    assert isinstance(listed, list) and len(listed) == 5
    assert all(set(e) == {"students", "kind", "evidence", "grade_ids"} for e in listed)
    out = capsys.readouterr().out
    assert "bob: 0/40 (grade follows the replay)\n  - autograd [ex1]: " + GRAD in out
    assert "  - similar (with bob) [ex1_dW1]: 82% alike\n      line one | line one" in out
    assert "  - similar (with alice) [ex1_dW1]: 82% alike\n" in out  # the lines once, under alice
    assert out.index("bob:") < out.index("carol:") < out.index("dave:")


def test_nothing_to_report(tmp_path, capsys):
    assert main([str(tmp_path)]) == 0
    assert (tmp_path / "reports" / "suspicious.json").read_text() == "[]"
    assert "no suspicious submissions" in capsys.readouterr().out


def test_student_text_cannot_reach_the_terminal(tmp_path, capsys):
    replay = tmp_path / "reports" / "replay"
    replay.mkdir(parents=True)
    evil = "x\x1b[2J\nfake: line"
    flags = [{"kind": "autograd", "evidence": f"ex1_solution, line 1: reads .grad: {evil}", "grade_ids": []}]
    (replay / "e.json").write_text(json.dumps(_record("e\x1b[31m", flags)))
    main([str(tmp_path)])
    out = capsys.readouterr().out
    assert "\x1b" not in out and "no grade id" in out


def test_a_missing_similarity_module_is_skipped(course, monkeypatch):
    monkeypatch.setitem(sys.modules, "grader.reports.similarity", None)  # import fails: not there
    assert [e.kind for e in collect_findings(course)] == ["autograd", "tampering", "kernel", "tampering"]
    assert suspicious.grade_ids_text(EX1 + ["ex2_dlogits"]) == "ex1, ex2_dlogits"
    assert suspicious.grade_ids_text(EX1[:24] + ["other"]) == "24 of ex1's 26, other"


def test_the_former_per_student_view(course):
    old = suspicious.collect(course)
    assert list(old) == ["bob", "carol", "dave"]
    assert old["bob"] == {"score": 0.0, "max_score": 40.0, "reasons": [f"autograd: {GRAD}"], "findings": []}
