"""grader/grading/workers.py and progress.py in-process: how a class is shared among workers,
the nbgrader command each runs, the one retry, and what the TA sees."""

from __future__ import annotations

import io

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
