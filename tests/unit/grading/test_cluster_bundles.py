"""grader/grading/bundles.py, cluster.py and preprocessors/use_remote_result.py in-process: what a
cluster task carries each way, and how the coordinator records a worker's notebook."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook
from traitlets.config import Config

from grader.exercise import spec
from grader.exercise.graded import GradedExercise
from grader.grading import cluster, recorder, remote
from grader.grading.bundles import pack, unpack
from grader.preprocessors.use_remote_result import UseRemoteResult, staged_notebook

from conftest import ROOT
from tiny_exercise import TINY


def test_pack_and_unpack_round_trip(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "f.txt").write_text("x")
    unpack(pack(tmp_path, ["a", "missing"]), tmp_path / "out")
    assert (tmp_path / "out" / "a" / "b" / "f.txt").read_text() == "x"


def _tar(name: str) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        info = tarfile.TarInfo(name)
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    return raw.getvalue()


def test_unpack_refuses_a_path_that_climbs_out(tmp_path):
    with pytest.raises(tarfile.TarError):
        unpack(_tar("../escape.txt"), tmp_path / "out")
    assert not (tmp_path / "escape.txt").exists()


def test_unpack_puts_an_absolute_path_inside(tmp_path):
    unpack(_tar("/abs-escape-test/escape.txt"), tmp_path / "out")
    assert (tmp_path / "out" / "abs-escape-test" / "escape.txt").exists()
    assert not Path("/abs-escape-test").exists()


def test_a_task_carries_one_submission_and_its_notes(tmp_path):
    for student in ("alice", "bob"):
        (tmp_path / "submitted" / student / "backprop_ninja").mkdir(parents=True)
        (tmp_path / "submitted" / student / "backprop_ninja" / "backprop_ninja.ipynb").write_text("{}")
    (tmp_path / "reports" / "intake").mkdir(parents=True)
    (tmp_path / "reports" / "intake" / "alice.json").write_text("{}")
    with tarfile.open(fileobj=io.BytesIO(cluster.submission_files(tmp_path, ["alice"], spec.NINJA))) as tar:
        names = tar.getnames()
    assert "submitted/alice/backprop_ninja/backprop_ninja.ipynb" in names
    assert "reports/intake/alice.json" in names
    assert not any("bob" in n for n in names)


def test_the_common_files_are_the_instructors(tmp_path):
    (tmp_path / "source" / "backprop_ninja").mkdir(parents=True)
    (tmp_path / "source" / "backprop_ninja" / "names.txt").write_text("emma\n")
    (tmp_path / "nbgrader_config.py").write_text("c = get_config()\n")
    (tmp_path / "gradebook.db").write_text("not shipped")
    with tarfile.open(fileobj=io.BytesIO(cluster.common_files(tmp_path, spec.NINJA))) as tar:
        names = set(tar.getnames())
    assert {"nbgrader_config.py", "source/backprop_ninja/names.txt"} <= names
    assert "gradebook.db" not in names


def test_a_written_exercise_travels_with_its_own_names(tmp_path):
    """A written exercise on the cluster: its source (the definition in its metadata, its setup's
    files), its submissions, and its records back in reports/replay-<name>/."""
    written = GradedExercise.written(TINY)
    (tmp_path / "source" / "tiny").mkdir(parents=True)
    (tmp_path / "source" / "tiny" / "tiny.ipynb").write_text("{}")
    (tmp_path / "submitted" / "alice" / "tiny").mkdir(parents=True)
    (tmp_path / "submitted" / "alice" / "tiny" / "tiny.ipynb").write_text("{}")
    with tarfile.open(fileobj=io.BytesIO(cluster.common_files(tmp_path, written))) as tar:
        assert "source/tiny/tiny.ipynb" in tar.getnames()
    with tarfile.open(fileobj=io.BytesIO(cluster.submission_files(tmp_path, ["alice"], written))) as tar:
        assert "submitted/alice/tiny/tiny.ipynb" in tar.getnames()
    assignment = cluster.assignment_of(written, tmp_path)
    assert assignment == remote.Assignment("tiny", "tiny", "replay-tiny")
    assert cluster.assignment_of(spec.NINJA, tmp_path) == remote.Assignment()  # the kit's own: replay/
    worker = tmp_path / "worker"
    (worker / "autograded" / "alice" / "tiny").mkdir(parents=True)
    nbformat.write(new_notebook(), worker / "autograded" / "alice" / "tiny" / "tiny.ipynb")
    (worker / "reports" / "replay-tiny").mkdir(parents=True)
    (worker / "reports" / "replay-tiny" / "alice.json").write_text('{"student": "alice"}')
    course = tmp_path / "course"
    course.mkdir()
    back = pack(worker, remote.result_paths("alice", assignment))
    problems = cluster._stage(course, ["alice", "bob"], back, assignment)  # bob's did not come back
    assert list(problems) == ["bob"] and "the worker's nbgrader did not grade it" in problems["bob"]
    assert (course / "reports" / "replay-tiny" / "alice.json").read_text() == '{"student": "alice"}'
    assert staged_notebook(course, "alice", "tiny").is_file()
    assert not (course / "reports" / "replay").exists()


def test_a_worker_task_never_loads_the_course_configuration(tmp_path, monkeypatch):
    """The course's reports folder travels with the task (assignment_of reads it on the
    coordinator): the worker process grades, writes its log and packs its results without
    loading nbgrader_config.py, which imports nbgrader (about 2 CPU-s a worker process)."""
    (tmp_path / "nbgrader_config.py").write_text("c = get_config()\nc.ReplayGrades.report_dir = 'records'\n")
    assignment = cluster.assignment_of(spec.NINJA, tmp_path)
    assert assignment.reports == "records"
    worker = tmp_path / "worker"

    class Resident:  # the worker's nbgrader: it grades alice (a notebook and a record)
        def run(self, *args):
            nb = worker / "autograded" / "alice" / spec.ASSIGNMENT / f"{spec.NOTEBOOK}.ipynb"
            nb.parent.mkdir(parents=True)
            nb.write_text("{}")
            (nb.parent / "names.txt").write_text("emma\n")  # the submission's: the coordinator has it
            (worker / "records" / "replay").mkdir(parents=True)
            (worker / "records" / "replay" / "alice.json").write_text("{}")
            return 0, "graded alice"

    def no_config(course):
        raise AssertionError(f"the worker loaded {course}'s configuration")

    monkeypatch.setattr(remote, "_prepared", lambda common, name: worker)
    monkeypatch.setitem(remote._residents, worker, Resident())
    monkeypatch.setattr("grader.settings.course_config", no_config)
    back = remote.grade_submissions(b"", pack(tmp_path, []), ["alice"], [], assignment)
    with tarfile.open(fileobj=io.BytesIO(back)) as tar:
        names = set(tar.getnames())
    notebook = f"autograded/alice/{spec.ASSIGNMENT}/{spec.NOTEBOOK}.ipynb"
    assert {notebook, "records/replay/alice.json", "records/remote.log"} == names, names


@pytest.mark.parametrize(
    "n,workers,sizes",
    [
        (5, 2, [1, 1, 1, 1, 1]),  # a small class: one a task, as before
        (40, 2, [8, 8, 6, 4, 3, 2, 2] + [1] * 7),  # half a worker's share of what is left
        (200, 2, [8] * 22 + [6, 4, 3, 2, 2] + [1] * 7),  # never more than CLUSTER_TASK_SUBMISSIONS
        (3, 0, [1, 1, 1]),  # no worker known yet: one a task
    ],
)
def test_a_task_grades_a_few_submissions(n, workers, sizes):
    students = [f"s{i:03d}" for i in range(n)]
    tasks = cluster.chunks(students, workers)
    assert [len(t) for t in tasks] == sizes and [s for t in tasks for s in t] == students


def test_the_finishing_pass_records_the_workers_notebook(tmp_path):
    staged = staged_notebook(tmp_path, "alice", "backprop_ninja")
    staged.parent.mkdir(parents=True)
    nbformat.write(new_notebook(cells=[new_code_cell("graded = True")]), staged)
    config = Config()
    config.CourseDirectory.root = str(tmp_path)
    resources = {
        "nbgrader": {"student": "alice", "notebook": "backprop_ninja", "assignment": "backprop_ninja"}
    }
    out, _ = UseRemoteResult(config=config).preprocess(new_notebook(cells=[new_code_cell("mine")]), resources)
    assert [c.source for c in out.cells] == ["graded = True"]
    resources["nbgrader"]["student"] = "bob"
    with pytest.raises(FileNotFoundError):
        UseRemoteResult(config=config).preprocess(new_notebook(), resources)


def test_the_finishing_pass_only_records():
    assert any("UseRemoteResult" in a for a in recorder.FINISH)
    assert all("Execute" not in a and "ReplayGrades" not in a for a in recorder.FINISH)


def test_the_finishing_pass_records_with_the_configurations_own_steps():
    """Each step that writes grades is the one nbgrader_config.py names (the kit's
    CheckCellMetadata, not nbgrader's, which checks its schema at every cell)."""
    text = (ROOT / "nbgrader_config.py").read_text()
    configured = text.split("c.Autograde.autograde_preprocessors = [")[1].split("]")[0]
    steps = [a.split("=", 1)[1] for a in recorder.FINISH if "autograde_preprocessors" in a]
    assert len(steps) == 3
    for step in steps:
        module, name = step.rsplit(".", 1)
        assert (f'KIT + "{name}"' if module == "grader.preprocessors" else f"    {name},") in configured, step


def test_a_submission_a_task_did_not_bring_back_is_tried_once_more_alone(tmp_path, monkeypatch):
    """The coordinator's rounds (the tasks themselves run on real workers in tests/e2e/test_cluster.py):
    16 students on 2 workers go as 10 tasks, the largest first; the one a task lost is tried again
    in a task of its own, as final; a round of single tasks is final at once."""
    rounds = []

    def fake_round(client, course, exercise, common, tasks, extra, progress, final, staged):
        rounds.append(([len(t) for t in tasks], final))
        flat = [s for t in tasks for s in t]
        lost = ["s03"] if len(rounds) == 1 else []
        return [s for s in flat if s not in lost], lost

    class Client:  # the two calls _grade_on makes of distributed's Client before its rounds
        def scatter(self, data, broadcast):
            return data

        def scheduler_info(self):
            return {"workers": {"w1": {}, "w2": {}}}

    class Notes:
        said: list = []

        def note(self, text):
            self.said.append(text)

    monkeypatch.setattr(cluster, "_round", fake_round)
    monkeypatch.setattr(cluster, "common_files", lambda course, exercise: b"")
    students, notes = [f"s{i:02d}" for i in range(16)], Notes()
    back = cluster._grade_on(Client(), tmp_path, spec.NINJA, students, [], notes, lambda students: None)
    assert rounds == [([4, 3, 2] + [1] * 7, False), ([1], True)] and sorted(back) == students
    assert notes.said == ["1 not graded: trying them once more, one a task"]
    rounds.clear()
    cluster._grade_on(Client(), tmp_path, spec.NINJA, students[:5], [], notes, lambda students: None)
    assert rounds == [([1] * 5, True)]  # one a task already: nothing to try alone


def test_a_gone_worker_process_s_copy_of_the_course_is_swept(tmp_path, monkeypatch):
    monkeypatch.setattr(remote.tempfile, "tempdir", str(tmp_path))
    gone = int(Path("/proc/sys/kernel/pid_max").read_text()) + 1  # no process has it
    for name, pid in (("gone", str(gone)), ("alive", str(remote.os.getpid())), ("odd", "x")):
        (tmp_path / f"{remote.PREFIX}{name}").mkdir()
        (tmp_path / f"{remote.PREFIX}{name}" / remote.OWNER).write_text(pid)
    remote._sweep()
    assert sorted(p.name.removeprefix(remote.PREFIX) for p in tmp_path.iterdir()) == ["alive", "odd"]
