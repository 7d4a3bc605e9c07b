"""Grading a class on a Dask cluster (`backprop-ninja grade --scheduler tcp://HOST:8786`).

No shared filesystem: each task ships the course's common files (once per worker) and one
submission to a worker, which grades it with real nbgrader and the kit's configuration
(remote.py) and ships back the autograded notebook and the replay record. The coordinator
alone writes files and the gradebook: a last `nbgrader autograde` pass records each worker's
notebook as it is (UseRemoteResult), so the gradebook, feedback and export work unchanged.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from ..exercise.graded import GradedExercise
from ..settings import CLUSTER_RETRIES, report_dir
from . import remote
from .bundles import pack, unpack
from .progress import Progress

FINISH = [
    "--Autograde.sanitize_preprocessors=grader.preprocessors.use_remote_result.UseRemoteResult",
    *(
        f"--Autograde.autograde_preprocessors=nbgrader.preprocessors.{name}"
        for name in ("SaveAutoGrades", "AssignLatePenalties", "CheckCellMetadata")
    ),
]


def common_files(course: Path, exercise: GradedExercise) -> bytes:
    a = exercise.assignment  # its source carries a written exercise's definition and setup files
    return pack(course, ["nbgrader_config.py", f"source/{a}", f"release/{a}"])


def submission_files(course: Path, student: str, exercise: GradedExercise) -> bytes:
    reports = report_dir(course).relative_to(course)
    return pack(course, [f"submitted/{student}/{exercise.assignment}", f"{reports}/intake/{student}.json"])


def assignment_of(exercise: GradedExercise) -> remote.Assignment:
    """What a worker needs to know of the exercise: names only (its definition is in the files)."""
    return remote.Assignment(exercise.assignment, exercise.notebook, exercise.records(Path()).name)


def grade(
    course: Path,
    exercise: GradedExercise,
    students: list[str],
    *,
    scheduler: str,
    extra: list[str],
    progress: Progress,
) -> list[str]:
    """Grade on the cluster; returns the students whose results came back, staged for the
    coordinator's recording pass (FINISH)."""
    from distributed import Client, as_completed

    back = []
    with Client(scheduler) as client:
        common = client.scatter(common_files(course, exercise), broadcast=True)
        assignment = assignment_of(exercise)
        futures = {
            client.submit(
                remote.grade_submission,
                common,
                submission_files(course, s, exercise),
                s,
                list(extra),
                assignment,
                key=f"backprop-ninja-{s}",
                pure=False,
                retries=CLUSTER_RETRIES,
            ): s
            for s in students
        }
        for future in as_completed(futures):
            student = futures[future]
            try:
                _stage(course, student, future.result(), assignment)
            except Exception as e:  # a worker's failure costs its submission only
                progress.failed(student, f"on the cluster: {type(e).__name__}: {str(e)[:300]}")
                continue
            back.append(student)
            progress.done(student)
    return back


def _stage(course: Path, student: str, result: bytes, assignment: remote.Assignment) -> None:
    """The worker's notebook to the staging folder, its replay record to the reports."""
    reports = report_dir(course)
    with tempfile.TemporaryDirectory() as tmp:
        unpack(result, Path(tmp))
        nb = Path(tmp) / "autograded" / student / assignment.name / f"{assignment.notebook}.ipynb"
        if not nb.is_file():
            log = Path(tmp) / reports.relative_to(course) / "remote.log"
            tail = log.read_text(errors="replace")[-1500:] if log.exists() else ""
            raise RuntimeError(f"the worker's nbgrader did not grade it:\n{tail}")
        staged = reports / "remote" / student
        staged.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(nb, staged / nb.name)
        record = Path(tmp) / reports.relative_to(course) / assignment.records / f"{student}.json"
        if record.is_file():
            (reports / assignment.records).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(record, reports / assignment.records / record.name)
