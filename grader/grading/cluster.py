"""Grading a class on a Dask cluster (`backprop-ninja grade --scheduler tcp://HOST:8786`).

No shared filesystem: each task ships the course's common files (once per worker) and a few
submissions to a worker, which grades it with real nbgrader and the kit's configuration
(remote.py) and ships back the autograded notebook and the replay record. The coordinator
alone writes files and the gradebook: its `nbgrader autograde` with the recording preprocessors
records each worker's notebook as it is (UseRemoteResult) as its task comes back (recorder.py), so
the gradebook, feedback and export work unchanged.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from ..exercise.graded import GradedExercise
from ..settings import CLUSTER_RETRIES, CLUSTER_TASK_SUBMISSIONS, report_dir
from . import remote
from .bundles import pack, unpack
from .progress import Progress


def common_files(course: Path, exercise: GradedExercise) -> bytes:
    a = exercise.assignment  # its source carries a written exercise's definition and setup files
    return pack(course, ["nbgrader_config.py", f"source/{a}", f"release/{a}"])


def submission_files(course: Path, students: list[str], exercise: GradedExercise) -> bytes:
    reports = report_dir(course).relative_to(course)
    paths = [f"submitted/{s}/{exercise.assignment}" for s in students]
    return pack(course, paths + [f"{reports}/intake/{s}.json" for s in students])


def chunks(students: list[str], workers: int) -> list[list[str]]:
    """Tasks of a few submissions each, for one command of the worker's resident nbgrader: each
    about half a worker's share of what is left after the tasks before it (at most
    CLUSTER_TASK_SUBMISSIONS), so they shrink towards one submission at the end and no worker
    idles long while another finishes a big one. Dask runs them in the order submitted."""
    out, i = [], 0
    while i < len(students):
        left = len(students) - i
        size = max(1, min(CLUSTER_TASK_SUBMISSIONS, left // (2 * workers))) if workers > 0 else 1
        out.append(students[i : i + size])
        i += size
    return out


def assignment_of(exercise: GradedExercise, course: Path) -> remote.Assignment:
    """What a worker needs to know of the exercise: names only (its definition is in the files),
    and where the course keeps its reports."""
    reports = str(report_dir(course).relative_to(course))
    return remote.Assignment(exercise.assignment, exercise.notebook, exercise.records(Path()).name, reports)


def grade(
    course: Path,
    exercise: GradedExercise,
    students: list[str],
    *,
    scheduler: str,
    extra: list[str],
    progress: Progress,
    staged: Callable[[list[str]], None] = lambda students: None,
) -> list[str]:
    """Grade on the cluster; returns the students whose results came back, each task's handed to
    `staged` as it is staged (the recorder's). A submission whose task brought nothing back is
    tried once more in a task of its own."""
    from distributed import Client

    with Client(scheduler) as client:
        return _grade_on(client, course, exercise, students, extra, progress, staged)


def _grade_on(client, course, exercise, students, extra, progress, staged) -> list[str]:
    common = client.scatter(common_files(course, exercise), broadcast=True)
    tasks = chunks(students, len(client.scheduler_info()["workers"]))
    run = lambda tasks, final: _round(client, course, exercise, common, tasks, extra, progress, final, staged)  # noqa: E731
    back, failed = run(tasks, len(tasks) == len(students))
    if failed and len(tasks) < len(students):
        progress.note(f"{len(failed)} not graded: trying them once more, one a task")
        back += run([[s] for s in failed], True)[0]
    return back


def _round(
    client, course, exercise, common, tasks, extra, progress, final, staged
) -> tuple[list[str], list[str]]:
    """One round of tasks; the students staged, and those not."""
    from distributed import as_completed

    assignment, back, failed = assignment_of(exercise, course), [], []
    futures = {
        client.submit(
            remote.grade_submissions,
            common,
            submission_files(course, task, exercise),
            task,
            list(extra),
            assignment,
            key=f"backprop-ninja-{task[0]}-{len(task)}-{final}",
            pure=False,
            retries=CLUSTER_RETRIES,
        ): task
        for task in tasks
    }
    for future in as_completed(futures):
        task = futures[future]
        try:
            problems = _stage(course, task, future.result(), assignment)
        except Exception as e:  # a worker's failure costs its task only
            problems = dict.fromkeys(task, f"on the cluster: {type(e).__name__}: {str(e)[:300]}")
        for student in task:
            if student in problems:
                progress.failed(student, problems[student], final=final)
                failed.append(student)
            else:
                back.append(student)
                progress.done(student)
        staged([s for s in task if s not in problems])
    return back, failed


def _stage(course: Path, students: list[str], result: bytes, assignment: remote.Assignment) -> dict[str, str]:
    """Each worker's notebook to the staging folder, its replay record to the reports; the
    students whose notebook did not come back, with the worker's log."""
    reports, problems = report_dir(course), {}
    with tempfile.TemporaryDirectory() as tmp:
        unpack(result, Path(tmp))
        log = Path(tmp) / reports.relative_to(course) / "remote.log"
        tail = log.read_text(errors="replace")[-1500:] if log.exists() else ""
        for student in students:
            nb = Path(tmp) / "autograded" / student / assignment.name / f"{assignment.notebook}.ipynb"
            if not nb.is_file():
                problems[student] = f"the worker's nbgrader did not grade it:\n{tail}"
                continue
            staged = reports / "remote" / student
            staged.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(nb, staged / nb.name)
            record = Path(tmp) / reports.relative_to(course) / assignment.records / f"{student}.json"
            if record.is_file():
                (reports / assignment.records).mkdir(parents=True, exist_ok=True)
                shutil.copyfile(record, reports / assignment.records / record.name)
    return problems
