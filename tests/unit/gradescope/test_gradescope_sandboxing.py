"""Gradescope where the sandbox cannot start: run_autograder refuses (results.json says why
to staff, plainly to the student) unless the zip was built with --allow-unsandboxed; then it
grades as root only, with what holds solutions or grades closed to other users first."""

from __future__ import annotations

import json
import os
import stat
import zipfile

import pytest

from grader.confine import VISIBLE_INSIDE
from grader.confine.probe import Status
from grader.gradescope import build, results, run, sandboxing

REASON = "/x/bwrap does not work: `bwrap --version` exited 1 (no output)"


@pytest.fixture
def broken(monkeypatch):
    monkeypatch.setattr(sandboxing, "sandbox_status", lambda: Status(False, REASON))


def test_refused_results_tell_staff_why_and_the_student_plainly():
    data = results.refused(REASON, execution_time=2.4).to_json()
    assert data["score"] == 0.0 and data["execution_time"] == 2
    assert data["output"] == results.STUDENT_REFUSAL and REASON not in data["output"]
    student, staff = data["tests"]
    assert student["visibility"] == "visible" and student["output"] == results.STUDENT_REFUSAL
    assert REASON not in json.dumps(student)
    assert staff["visibility"] == "hidden" and staff["status"] == "failed"
    assert staff["name"] == f"not graded: the sandbox could not start ({REASON})"
    assert data["extra_data"] == {"not_graded": staff["name"], "sandbox": REASON}
    assert all(t["max_score"] == 0 for t in data["tests"])


def test_a_test_without_status_has_no_status_key():
    assert "status" not in results.Test("a", 1.0, 1.0, "ok").to_json()


def test_graded_unsandboxed_is_said_to_staff_only():
    out = results.unsandboxed(results.Results(output="Backprop Ninja: 3/38"), REASON, ["note"])
    data = out.to_json()
    assert data["output"] == "Backprop Ninja: 3/38"
    (warning,) = data["tests"]
    assert warning["visibility"] == "hidden" and REASON in warning["output"] and "note" in warning["output"]
    assert "WITHOUT" in data["extra_data"]["sandbox"]


def test_decide(broken, monkeypatch):
    assert sandboxing.decide({}) == (REASON, REASON)
    assert sandboxing.decide({"allow_unsandboxed": False}) == (REASON, REASON)
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert sandboxing.decide({"allow_unsandboxed": True}) == (REASON, None)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    reason, refusal = sandboxing.decide({"allow_unsandboxed": True})
    assert refusal.startswith(REASON) and "root" in refusal


def test_decide_when_it_works(monkeypatch):
    monkeypatch.setattr(sandboxing, "sandbox_status", lambda: Status(True))
    assert sandboxing.decide({}) == (None, None)


def test_run_refuses_before_anything_runs(broken, tmp_path):
    (tmp_path / "submission").mkdir()
    (tmp_path / "submission" / "backprop_ninja.ipynb").write_text("{}")
    out = run.run(root=tmp_path)
    data = json.loads((tmp_path / "results" / "results.json").read_text())
    assert data == out.to_json() and data["output"] == results.STUDENT_REFUSAL
    assert data["extra_data"]["sandbox"] == REASON
    assert not run.Layout(tmp_path).work.exists()  # no copy of the course, no nbgrader, no kernel


def test_no_notebook_is_still_the_students_to_fix(broken, tmp_path):
    (tmp_path / "submission").mkdir()
    assert "no notebook" in run.run(root=tmp_path).output


def _mode(path):
    return stat.S_IMODE(path.stat().st_mode)


def test_lock_down_closes_the_zip_the_work_and_the_kits_answers(tmp_path, monkeypatch):
    source, work = tmp_path / "source", tmp_path / "grading"
    kit = source / "kit" / "grader"
    kit.mkdir(parents=True)
    for name in (*VISIBLE_INSIDE, "reference", "verdicts", "settings.py"):
        path = kit / name
        path.write_text("") if name.endswith(".py") else path.mkdir()
    os.chmod(source, 0o755)
    monkeypatch.setattr(sandboxing, "package_inside", lambda: kit)
    assert sandboxing.lock_down(source=source, work=work) == []
    assert _mode(source) == 0o700 and _mode(work) == 0o700
    assert _mode(kit / "reference") & 0o077 == 0 and _mode(kit / "settings.py") & 0o077 == 0
    assert all(_mode(kit / name) & 0o005 for name in VISIBLE_INSIDE)


def test_lock_down_says_what_it_cannot_close(tmp_path, monkeypatch):
    checkout = tmp_path / "checkout" / "grader"
    (checkout / "reference").mkdir(parents=True)
    (tmp_path / "source").mkdir()
    monkeypatch.setattr(sandboxing, "package_inside", lambda: checkout)
    (left,) = sandboxing.lock_down(source=tmp_path / "source", work=tmp_path / "grading")
    assert str(checkout) in left and _mode(checkout / "reference") & 0o005


def test_the_zip_records_the_opt_in(tmp_path):
    course = tmp_path / "course"
    (course / "source").mkdir(parents=True)
    (course / "nbgrader_config.py").write_text("")
    (course / "source" / "backprop_ninja").mkdir()
    (course / "source" / "backprop_ninja" / "names.txt").write_text("emma\n")
    for allowed in (False, True):
        zip_path = build.build(out=tmp_path / f"{allowed}.zip", course=course, allow_unsandboxed=allowed)
        with zipfile.ZipFile(zip_path) as zf:
            assert json.loads(zf.read("gradescope.json"))["allow_unsandboxed"] is allowed
