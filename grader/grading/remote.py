"""The worker's side of cluster grading (cluster.py): runs on a Dask worker, on a machine with
the kit installed and nothing of the course but what a task brings.

A worker process prepares the course once (its configuration, the assignment and a gradebook
of its own), then grades a few submissions per task with real `nbgrader autograde` and the
kit's configuration, and returns the autograded folder and the replay record. Every task of the
worker runs in the same resident nbgrader process (resident.py), so its warm kernel server,
replay server and dataset are started once per worker, as a local worker's are. It never
touches the course's gradebook: the coordinator alone writes that.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from ..exercise import spec
from ..settings import GRADEBOOK_LOCK_SECONDS, REPORT_DIR
from .bundles import pack, unpack
from .resident import Resident


@dataclass(frozen=True)
class Assignment:
    """The assignment a task grades: its name, its notebook, its judge's records folder, and the
    course's reports folder (relative to the course): the coordinator reads the configuration,
    so the worker process never loads it (it imports nbgrader: about 2 CPU-s a worker process)."""

    name: str = spec.ASSIGNMENT
    notebook: str = spec.NOTEBOOK
    records: str = "replay"
    reports: str = REPORT_DIR


PREFIX, OWNER = "bn-remote-course-", ".owner-pid"  # a worker process's copy of a course, and whose
_courses: dict[tuple[str, str], Path] = {}
_residents: dict[Path, Resident] = {}  # a course's nbgrader, kept for the worker's later tasks
_lock = threading.Lock()  # one task at a time per worker process: one core each


def grade_submissions(
    common: bytes, submissions: bytes, students: list[str], nbgrader_args: list[str], assignment: Assignment
) -> bytes:
    """The packed results of grading `students` (result_paths of each) in one nbgrader process:
    its warm kernel and replay servers serve them all, as a local worker's share."""
    with _lock:
        course = _prepared(common, assignment.name)
        submitted = course / "submitted"
        for left in submitted.iterdir() if submitted.is_dir() else []:  # only this task's are graded
            shutil.rmtree(left, ignore_errors=True)
        try:
            unpack(submissions, course)
            _, said = _residents[course].run(
                "autograde", assignment.name, "--force", _db(course), *nbgrader_args
            )
            log = course / assignment.reports / "remote.log"  # this task's part of what nbgrader logged
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text(said[-200_000:])
            paths = [p for s in students for p in result_paths(s, assignment)]
            return pack(course, sorted(set(paths)))
        finally:
            for student in students:
                for path in (submitted / student, course / "autograded" / student):
                    shutil.rmtree(path, ignore_errors=True)


def result_paths(student: str, assignment: Assignment) -> list[str]:
    """The autograded notebook (the coordinator records nothing else of the folder: not the
    submission's files, which it has), the judge's record, the task's log."""
    reports, records = assignment.reports, assignment.records
    notebook = f"autograded/{student}/{assignment.name}/{assignment.notebook}.ipynb"
    return [notebook, f"{reports}/{records}/{student}.json", f"{reports}/remote.log"]


def _prepared(common: bytes, assignment: str) -> Path:
    """This worker's copy of the course: the instructor's files and a gradebook that knows the
    assignment (nbgrader needs it to autograde), made once per course and worker process."""
    key = (hashlib.sha256(common).hexdigest(), assignment)
    if key not in _courses:
        _sweep()
        course = Path(tempfile.mkdtemp(prefix=PREFIX))
        (course / OWNER).write_text(str(os.getpid()))
        unpack(common, course)
        resident = Resident(course, course / "resident-nbgrader.log")  # this command and every task's
        rc, said = resident.run("generate_assignment", assignment, "--force", _db(course))
        if rc != 0:
            resident.close()
            raise RuntimeError(f"the worker could not prepare the course:\n{said[-3000:]}")
        _residents[course] = resident
        _courses[key] = course
    return _courses[key]


def _sweep() -> None:
    """The copies of worker processes that are gone: a Dask worker process ends without running
    its exit handlers (multiprocessing's os._exit), or is killed, and leaves its copy behind."""
    for folder in Path(tempfile.gettempdir()).glob(PREFIX + "*"):
        try:
            pid = int((folder / OWNER).read_text())
            os.kill(pid, 0)
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
        except (OSError, ValueError):  # not ours to judge (another user's, or half made): left
            continue


def _db(course: Path) -> str:
    """The worker's own gradebook, whatever database the course uses."""
    return f"--CourseDirectory.db_url=sqlite:///{course / 'gradebook.db'}?timeout={GRADEBOOK_LOCK_SECONDS}"
