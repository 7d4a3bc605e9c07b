"""grader/grading/workers.py and progress.py in-process: how a class is shared among workers,
the nbgrader command each runs, the one retry, and what the TA sees."""

from __future__ import annotations

import io
import json
import os

from grader.grading import workers
from grader.grading.progress import Progress


def test_split_is_round_robin_and_never_empty():
    assert workers.split(list("abcde"), 2) == [["a", "c", "e"], ["b", "d"]]
    assert workers.split(list("ab"), 8) == [["a"], ["b"]]
    assert workers.split(list("ab"), 0) == [["a", "b"]]


def test_each_worker_excludes_the_others():
    args = workers.autograde_args(["b"], ["a", "b", "c"], force=True, extra=["--Execute.timeout=5"])
    assert args[:2] == ["autograde", "backprop_ninja"]
    assert "--CourseDirectory.student_id_exclude=a,c" in args
    assert args[-2:] == ["--force", "--Execute.timeout=5"]
    alone = workers.autograde_args(["a", "b"], ["a", "b"], force=False, extra=[])
    assert not any("exclude" in part for part in alone) and "--force" not in alone


def test_a_failed_submission_is_tried_once_more(monkeypatch, tmp_path):
    calls = []

    def fake_run(course, shares, everyone, *, force, extra, progress, final):
        students = [s for share in shares for s in share.students]
        calls.append((sorted(students), force, final))
        return {s for s in students if s != "b" or final}  # b fails the first time only

    monkeypatch.setattr(workers, "_run", fake_run)
    progress = Progress(3, log=tmp_path / "log", stream=io.StringIO())
    graded = workers.grade(
        tmp_path,
        ["a", "b", "c"],
        ["a", "b", "c"],
        workers=2,
        force=False,
        extra=[],
        logs=tmp_path,
        progress=progress,
    )
    assert graded == {"a", "b", "c"}
    assert calls == [(["a", "b", "c"], False, False), (["b"], True, True)]


def test_plain_lines_without_a_terminal(tmp_path):
    out = io.StringIO()
    progress = Progress(2, log=tmp_path / "autograde.log", stream=out)
    progress.done("alice")
    progress.failed("bob\x1b[31m", "nbgrader exited with 1", final=False)
    progress.failed("bob\x1b[31m", "nbgrader exited with 1")
    progress.close()
    text, log = out.getvalue(), (tmp_path / "autograde.log").read_text()
    assert "graded alice (1/2)" in text and "graded alice (1/2)" in log
    assert "NOT GRADED yet (tried again at the end) bob" in text
    assert "\x1b" not in text and "\x1b" not in log  # a student id cannot colour the TA's terminal
    assert progress.failures == 1


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_bar_on_a_terminal(tmp_path):
    out = _Terminal()
    progress = Progress(4, log=tmp_path / "autograde.log", stream=out)
    progress.done("alice")
    progress.failed("bob", "crashed")
    progress.close()
    text = out.getvalue()
    assert "1/4" in text and "NOT GRADED bob: crashed" in text
    assert "graded alice" not in text  # the bar counts those; the log has them
    assert "graded alice (1/4)" in (tmp_path / "autograde.log").read_text()


def test_quiet_means_plain_lines_even_on_a_terminal(tmp_path):
    out = _Terminal()
    progress = Progress(1, log=tmp_path / "autograde.log", stream=out, quiet=True)
    progress.done("alice")
    progress.close()
    assert out.getvalue().strip() == "graded alice (1/1)"


class _Proc:
    """A share's nbgrader process, as far as _finished looks at it."""

    def __init__(self):
        self.returncode = None

    def poll(self):
        return self.returncode


def _graded_notebook() -> str:
    test = {"cell_type": "code", "metadata": {"nbgrader": {"grade": True}}, "outputs": [{"text": "ok"}]}
    return json.dumps({"cells": [test]})


def _write(path, text: str, mtime_ns: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    os.utime(path, ns=(mtime_ns, mtime_ns))


def test_a_notebook_caught_half_written_is_read_again(tmp_path):
    """nbconvert truncates, then writes, within one clock tick: the whole file can carry the
    mtime of the empty one the poller read. It is graded, not failed and graded again."""
    share = workers.Share(["alice"], tmp_path / "w.log", proc=_Proc(), pending={"alice"})
    progress = Progress(1, log=tmp_path / "autograde.log", stream=io.StringIO())
    nb = workers.autograded_notebook(tmp_path, "alice")
    _write(nb, "", 10**18)
    assert workers._finished(tmp_path, share, progress, final=False) == set()
    _write(nb, _graded_notebook(), 10**18)  # the same mtime
    assert workers._finished(tmp_path, share, progress, final=False) == {"alice"}
    assert progress.failures == 0


def test_an_ended_process_gets_one_last_uncached_look(tmp_path):
    share = workers.Share(["alice", "bob"], tmp_path / "w.log", proc=_Proc(), pending={"alice", "bob"})
    progress = Progress(2, log=tmp_path / "autograde.log", stream=io.StringIO())
    nb = workers.autograded_notebook(tmp_path, "alice")
    graded = _graded_notebook()
    sanitised = graded.replace('[{"text": "ok"}]', "[]").ljust(len(graded))  # the same size
    _write(nb, sanitised, 10**18)
    assert workers._finished(tmp_path, share, progress, final=True) == set()
    _write(nb, graded, 10**18)  # the same mtime and size: not read again while nbgrader runs
    assert workers._finished(tmp_path, share, progress, final=True) == set()
    share.proc.returncode = 0
    assert workers._finished(tmp_path, share, progress, final=True) == {"alice"}
    assert share.proc is None and progress.failures == 1  # bob: no notebook at all
