"""Grading a class on all cores: N `nbgrader autograde` processes side by side, each on its
share of the students, with the kit's configuration (each submission keeps its own sandbox,
its own uid and its own limits). The grades land in nbgrader's gradebook as with one process.

A share is a list of students, and one nbgrader process on this machine grades it, forked from
the batch's nbgrader server, which has imported nbgrader, torch and the judge once for all of
them (nbgrader_forks.py); a Dask cluster (cluster.py) runs the same nbgrader on other machines.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

from ..exercise import spec
from ..exercise.graded import GradedExercise
from ..settings import WORKER_STOP_SECONDS, db_url
from .nbgrader_forks import Forked, Forks
from .progress import Progress


@dataclass
class Share:
    students: list[str]
    log: Path
    exercise: GradedExercise = spec.NINJA
    proc: Forked | None = None
    pending: set[str] = field(default_factory=set)
    seen: dict[str, tuple] = field(default_factory=dict)  # (mtime, size) of notebooks read whole


def default_workers() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


def split(students: list[str], n: int) -> list[list[str]]:
    """Round robin, so each share gets early and late names alike."""
    n = max(1, min(n, len(students)))
    return [students[k::n] for k in range(n)]


def autograded_notebook(course: Path, student: str, exercise: GradedExercise = spec.NINJA) -> Path:
    return course / "autograded" / student / exercise.assignment / f"{exercise.notebook}.ipynb"


def looks_graded(course: Path, student: str, exercise: GradedExercise = spec.NINJA) -> bool | None:
    """For the progress bar: nbgrader writes the autograded notebook twice, first sanitised
    (no outputs), then graded (the test cells carry their verdicts). None: not there, or not
    whole (caught between nbconvert's truncating open and its write)."""
    try:
        cells = json.loads(autograded_notebook(course, student, exercise).read_text()).get("cells", [])
    except (OSError, ValueError, AttributeError):
        return None
    tests = [
        c for c in cells if isinstance(c, dict) and c.get("metadata", {}).get("nbgrader", {}).get("grade")
    ]
    return bool(tests) and all(c.get("outputs") for c in tests)


def graded_in_gradebook(course: Path, students: list[str], exercise: GradedExercise = spec.NINJA) -> set[str]:
    """The students whose every graded cell has its score in the gradebook: an interrupted
    grading leaves a submission without them, whatever files it left. One query for the whole
    class: a lookup a student took 3.8 s for 1,000 students, this takes 0.10 (asked up to four
    times in a cluster batch's end: resume, the recorder's check and its retry, the summary)."""
    from nbgrader import api
    from sqlalchemy import func

    with api.Gradebook(db_url(course)) as gb:
        rows = (
            gb.db.query(api.SubmittedAssignment.student_id, func.count(), func.count(api.Grade.auto_score))
            .join(api.Assignment, api.Assignment.id == api.SubmittedAssignment.assignment_id)
            .join(api.SubmittedNotebook, api.SubmittedNotebook.assignment_id == api.SubmittedAssignment.id)
            .join(api.Notebook, api.Notebook.id == api.SubmittedNotebook.notebook_id)
            .join(api.Grade, api.Grade.notebook_id == api.SubmittedNotebook.id)
            .join(api.GradeCell, api.GradeCell.id == api.Grade.cell_id)
            .filter(api.Assignment.name == exercise.assignment, api.Notebook.name == exercise.notebook)
            .filter(api.GradeCell.name.in_(list(exercise.by_grade_id)))  # the kit's, all autograded
            .group_by(api.SubmittedAssignment.student_id)
            .all()
        )
    asked = set(students)
    return {student for student, grades, scored in rows if student in asked and grades and grades == scored}


def autograde_args(
    share: list[str], everyone: list[str], *, force: bool, extra: list[str], assignment: str = spec.ASSIGNMENT
) -> list[str]:
    """The arguments of the share's `nbgrader autograde`."""
    others = sorted(set(everyone) - set(share))
    args = ["autograde", assignment]
    if others:  # nbgrader takes a glob to include and a comma-separated list to exclude
        args.append(f"--CourseDirectory.student_id_exclude={','.join(others)}")
    return args + (["--force"] if force else []) + list(extra)


def grade(
    course: Path,
    students: list[str],
    everyone: list[str],
    *,
    workers: int,
    force: bool,
    extra: list[str],
    logs: Path,
    progress: Progress,
    exercise: GradedExercise = spec.NINJA,
) -> set[str]:
    """Grade `students` with `workers` processes; a submission whose process failed is tried
    once more. Returns the students graded."""
    graded: set[str] = set()
    todo = list(students)
    with closing(Forks(course, logs / "worker-server.log")) as forks:
        for attempt in (1, 2):
            if not todo:
                break
            named = [(logs / f"worker-{attempt}-{k}.log", s) for k, s in enumerate(split(todo, workers))]
            shares = [Share(s, log, exercise) for log, s in named]
            graded |= _run(
                forks,
                shares,
                everyone,
                force=force or attempt > 1,
                extra=extra,
                progress=progress,
                final=attempt == 2,
            )
            todo = [s for s in todo if s not in graded]
            if todo and attempt == 1:
                progress.note(f"{len(todo)} not graded: trying them once more")
    return graded


def _run(forks: Forks, shares, everyone, *, force, extra, progress, final) -> set[str]:
    graded: set[str] = set()
    try:
        for share in shares:
            _start(forks, share, everyone, force=force, extra=extra)
        while any(share.proc is not None for share in shares):
            for share in shares:
                graded |= _finished(forks.course, share, progress, final)
            time.sleep(0.3)
    except KeyboardInterrupt:
        for share in shares:
            _stop(share)
        raise
    return graded


def _start(forks: Forks, share: Share, everyone: list[str], *, force: bool, extra: list[str]):
    share.pending = set(share.students)
    share.log.parent.mkdir(parents=True, exist_ok=True)
    assignment = share.exercise.assignment
    args = autograde_args(share.students, everyone, force=force, extra=extra, assignment=assignment)
    share.proc = forks.start(*args, log=share.log)


def _finished(course: Path, share: Share, progress: Progress, final: bool) -> set[str]:
    """The students of this share graded since the last look; when its process has ended,
    one last look at each (uncached), and the rest failed."""
    if share.proc is None:
        return set()
    ended = share.proc.poll() is not None  # before looking: a notebook written last still counts
    done = {s for s in share.pending if _graded_since(course, share, s, cached=not ended)}
    for student in sorted(done):
        progress.done(student)
    share.pending -= done
    if ended:
        for student in sorted(share.pending):
            why = f"nbgrader exited with {share.proc.returncode} (its log: {share.log.name})"
            progress.failed(student, why, final=final)
        share.proc = None
    return done


def _graded_since(course: Path, share: Share, student: str, *, cached: bool) -> bool:
    """Graded, read only when the notebook changed since the last whole read. A notebook read
    half-written is not remembered: nbconvert's open truncates it and its write follows within
    the same clock tick, so the finished file can carry the half-written one's mtime (a graded
    submission was then taken for failed and graded again at the end)."""
    try:
        stat = autograded_notebook(course, student, share.exercise).stat()
    except OSError:
        return False
    key = (stat.st_mtime_ns, stat.st_size)
    if cached and share.seen.get(student) == key:
        return False
    graded = looks_graded(course, student, share.exercise)
    if graded is not None:
        share.seen[student] = key
    return bool(graded)


def _stop(share: Share) -> None:
    if share.proc is not None and share.proc.poll() is None:
        try:
            os.killpg(share.proc.pid, signal.SIGTERM)
            share.proc.wait(timeout=WORKER_STOP_SECONDS)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(share.proc.pid, signal.SIGKILL)
