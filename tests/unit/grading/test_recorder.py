"""grader/grading/recorder.py's logic in-process: what its resident nbgrader is asked to record
and when (the resident itself: test_resident.py; the whole flow on a real cluster:
tests/e2e/test_cluster.py). The gradebook here is a set of the students recorded."""

from __future__ import annotations

import threading

from grader.exercise import spec
from grader.grading import recorder as recorder_mod


class FakeResident:
    """Records a command's students (those not excluded); the first command waits for `gate`."""

    def __init__(self, everyone, fail=()):
        self.everyone, self.fail, self.commands, self.recorded = everyone, set(fail), [], set()
        self.gate, self.closed = threading.Event(), False

    def run(self, *args):
        self.gate.wait(10)
        excluded = next((a.split("=", 1)[1].split(",") for a in args if "student_id_exclude" in a), [])
        students = sorted(set(self.everyone) - set(excluded))
        self.commands.append((students, args))
        self.recorded |= set(students) - self.fail
        self.fail = set()  # a failure happens once
        return 0, ""

    def close(self):
        self.closed = True


def _recorder(monkeypatch, tmp_path, everyone, fail=()):
    fake = FakeResident(everyone, fail)
    monkeypatch.setattr(recorder_mod, "Resident", lambda course, log: fake)
    monkeypatch.setattr(
        recorder_mod, "graded_in_gradebook", lambda c, students, e: fake.recorded & set(students)
    )
    return recorder_mod.Recorder(tmp_path, spec.NINJA, everyone, tmp_path / "finish.log"), fake


def test_what_comes_back_while_a_command_runs_is_recorded_in_one_next_command(monkeypatch, tmp_path):
    everyone = [f"s{k}" for k in range(7)]
    rec, fake = _recorder(monkeypatch, tmp_path, everyone)
    rec.add(["s0", "s1"])
    rec.add(["s2"])
    rec.add(["s3", "s4"])
    fake.gate.set()
    assert rec.finish() == {"s0", "s1", "s2", "s3", "s4"} and fake.closed
    assert [c[0] for c in fake.commands][-1] in (["s2", "s3", "s4"], ["s0", "s1", "s2", "s3", "s4"])
    assert all(set(recorder_mod.FINISH) <= set(args) and "--force" in args for _, args in fake.commands)


def test_a_student_a_command_did_not_record_is_tried_once_more_at_the_end(monkeypatch, tmp_path):
    rec, fake = _recorder(monkeypatch, tmp_path, ["a", "b", "c"], fail={"b"})
    fake.gate.set()
    rec.add(["a", "b"])
    assert rec.finish() == {"a", "b"}
    assert fake.commands[-1][0] == ["b"]


def test_nothing_staged_records_nothing(monkeypatch, tmp_path):
    rec, fake = _recorder(monkeypatch, tmp_path, ["a"])
    fake.gate.set()
    assert rec.finish() == set() and fake.commands == [] and fake.closed
