"""The kit's own nbgrader pipeline, for one submission: the course shipped in the zip
(course/: nbgrader_config.py, source/) is prepared once (release/ and an empty gradebook),
then each submission is graded in a throw-away copy of it by `nbgrader autograde`, with
the kit's configuration: the same preprocessors, the same judge, the same scores.
The assignment is the one the zip was built for (gradescope.json's "assignment"): Backprop
Ninja or an exercise written by `backprop-ninja new`, as its GradedExercise says.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

from ..confine.probe import refused_reason
from ..exercise import spec
from ..exercise.graded import GradedExercise
from ..grading.nbgrader_cli import run_nbgrader
from ..incoming import intake
from ..incoming.preflight import check_submission
from ..preprocessors.scope import NotAnExercise, required_exercise
from ..preprocessors.unsandboxed import ALLOW_FLAG
from ..reports.scores import read_scores
from ..settings import AUTOGRADE_SECONDS, report_dir

SETTINGS = "gradescope.json"  # beside course/ in the zip (build.py)


def read_settings(source: Path) -> dict:
    """The zip's settings; none (every default) where they cannot be read."""
    try:
        settings = json.loads((source / SETTINGS).read_text())
    except (OSError, ValueError):
        return {}
    return settings if isinstance(settings, dict) else {}


def zip_exercise(template: Path, settings: dict) -> GradedExercise:
    """The exercise the zip grades, found in its course as the batch finds it; a zip built
    before it named one grades Backprop Ninja, as it always did."""
    assignment = settings.get("assignment") or spec.ASSIGNMENT
    try:
        return required_exercise(template, assignment)
    except NotAnExercise as e:
        raise RuntimeError(str(e)) from None


def _db_url(course: Path) -> str:
    return f"sqlite:///{course / 'gradebook.db'}"


def nbgrader(course: Path, *args: str, log: Path | None = None) -> subprocess.CompletedProcess:
    """One nbgrader command in `course`; its gradebook is always the local one (a course
    configured for PostgreSQL still grades a Gradescope submission on its own)."""
    proc = run_nbgrader(
        course,
        *args,
        f"--CourseDirectory.db_url={_db_url(course)}",
        more_bins=[sysconfig.get_path("scripts")],  # so they go on PATH too (alembic)
        capture_output=True,
        text=True,
        timeout=AUTOGRADE_SECONDS,
        stdin=subprocess.DEVNULL,
    )
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(f"$ {' '.join(proc.args)}\n{proc.stdout}\n{proc.stderr}")
    return proc


def release_notebook(course: Path, exercise: GradedExercise) -> Path:
    return course / "release" / exercise.assignment / f"{exercise.notebook}.ipynb"


def prepare(course: Path, exercise: GradedExercise) -> None:
    """release/ and a gradebook that knows the assignment (setup.sh; else the first run)."""
    if release_notebook(course, exercise).is_file() and (course / "gradebook.db").is_file():
        return
    proc = nbgrader(course, "generate_assignment", exercise.assignment, "--force")
    if proc.returncode != 0:
        raise RuntimeError(f"nbgrader generate_assignment failed:\n{proc.stdout}\n{proc.stderr}")


def prepare_zip(source: Path) -> None:
    """setup.sh's step: the course of the zip extracted at `source`, for the zip's exercise."""
    template = source / "course"
    prepare(template, zip_exercise(template, read_settings(source)))


class SandboxRefused(RuntimeError):
    """nbgrader refused the submission: the sandbox did not start there (grader/confine/probe.py)."""

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)


@dataclass
class Graded:
    scores: dict[str, float]
    record: dict
    notes: list[str] = field(default_factory=list)  # the preflight's, for the student


def _copy_course(template: Path, work: Path) -> None:
    work.mkdir(parents=True, exist_ok=True)
    shutil.copy(template / "nbgrader_config.py", work / "nbgrader_config.py")
    shutil.copy(template / "gradebook.db", work / "gradebook.db")
    for folder in ("source", "release"):
        shutil.copytree(template / folder, work / folder)


def autograde(
    *,
    template: Path,
    work: Path,
    student: str,
    notebook: Path,
    exercise: GradedExercise,
    allow_unsandboxed: bool = False,
) -> Graded:
    """Grade `notebook` as `student`'s submission of `exercise` in a copy of the prepared course
    at `work`; without bubblewrap only if `allow_unsandboxed` (else SandboxRefused, as nbgrader
    refuses)."""
    prepare(template, exercise)
    _copy_course(template, work)
    folder = work / "submitted" / student / exercise.assignment
    folder.mkdir(parents=True)
    shutil.copyfile(notebook, folder / f"{exercise.notebook}.ipynb", follow_symlinks=False)
    # as `backprop-ninja grade` does before nbgrader: an unreadable file is graded as the empty assignment
    notes = check_submission(folder, exercise.notebook, release_notebook(work, exercise)).notes
    if exercise is spec.NINJA:  # as the batch: the rebuild's notes bound to its notebook; any's go to results
        intake.save_notes(work, student, notes)
    proc = nbgrader(
        work,
        "autograde",
        exercise.assignment,
        "--force",
        f"--student={student}",
        *([ALLOW_FLAG] if allow_unsandboxed else []),
        log=report_dir(work) / "nbgrader.log",
    )
    record_path = exercise.records(report_dir(work)) / f"{student}.json"
    found = [s for s in read_scores(_db_url(work), exercise) if s.student == student]
    if proc.returncode != 0 and (refused := refused_reason(proc.stdout + proc.stderr)):
        raise SandboxRefused(refused)
    if proc.returncode != 0 or not found or not record_path.is_file():
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-40:])
        raise RuntimeError(f"nbgrader autograde did not grade the submission ({proc.returncode}):\n{tail}")
    return Graded(found[0].by_grade_id, json.loads(record_path.read_text()), notes)
