"""The TA's one command for a class: `backprop-ninja grade [COURSE] [--workers N] [--force]`.

1. Preflight every submission (preflight.py), so a broken file costs only its student.
2. Resume: a submission whose grading was interrupted (its scores are not all in the
   gradebook) is graded again; finished ones are kept unless --force.
3. `nbgrader autograde` itself, on all cores (workers.py): the grades are nbgrader's, with the
   kit's configuration; a live bar shows progress, reports/autograde.log has a line each.
4. A summary: who was graded, who was not and why (also reports/batch.json), and the TAs' list
   of signs of cheating (reports/suspicious.json, as `backprop-ninja suspicious` writes it),
   within a fixed share of the grading time (settings.END_CHECKS_*): who similarity could not
   compare by then is listed as not compared.
"""

from __future__ import annotations

import argparse
import html
import json
import shutil
import sys
from pathlib import Path

from ..exercise import spec
from ..exercise.graded import GradedExercise
from ..incoming import intake
from ..incoming.preflight import check_submission
from ..preprocessors import unsandboxed
from ..preprocessors.scope import NotAnExercise, required_exercise
from ..quote import for_log
from ..reports import suspicious
from ..settings import report_dir
from ..verdicts.budget import NOT_COMPARED, end_checks_seconds
from . import cluster
from . import workers as workers_mod
from .progress import Progress
from .recorder import Recorder


def run(
    course: Path,
    *,
    force: bool = False,
    nbgrader_args: list[str] = (),
    workers: int | None = None,
    quiet: bool = False,
    scheduler: str | None = None,
    assignment: str = spec.ASSIGNMENT,
) -> dict:
    """Grade the class: on this machine's cores, or on a Dask cluster with `scheduler`."""
    exercise = _exercise(course, assignment)
    students = _students(course, exercise)
    summary: dict = {"students": {s: {"preflight": _preflight(course, s, exercise)} for s in students}}
    todo = _to_grade(course, students, exercise, force)
    reports = report_dir(course)
    log, logs, _ = exercise.batch_files(reports)
    shutil.rmtree(logs, ignore_errors=True)  # the workers' logs are this run's only
    logs.mkdir(parents=True)
    log.write_text("")
    n = workers or workers_mod.default_workers()
    progress = Progress(len(todo), log=log, quiet=quiet)
    where = f"on the cluster at {scheduler}" if scheduler else f"{min(n, len(todo))} worker(s)"
    progress.note(f"{len(todo)} to grade, {len(students) - len(todo)} graded before; {where}")
    try:
        if scheduler:
            _on_cluster(course, exercise, todo, students, scheduler, list(nbgrader_args), progress)
        else:
            workers_mod.grade(
                course,
                todo,
                students,
                workers=n,
                force=force,
                extra=list(nbgrader_args),
                logs=logs,
                progress=progress,
                exercise=exercise,
            )
    finally:
        summary["seconds"] = round(progress.close(), 1)
        _append_worker_logs(log, logs)
    summary["workers"] = scheduler or n
    _results(course, summary, exercise)
    return summary


def _exercise(course: Path, assignment: str) -> GradedExercise:
    try:
        return required_exercise(course, assignment)
    except NotAnExercise as e:
        raise BatchError(f"{e}: grade it with `nbgrader autograde {assignment}`") from None


def _to_grade(course: Path, students: list[str], exercise: GradedExercise, force: bool) -> list[str]:
    """Who is graded now: everyone with --force, else those not yet graded whole."""
    graded = set() if force else workers_mod.graded_in_gradebook(course, students, exercise)
    notebook = lambda s: workers_mod.autograded_notebook(course, s, exercise)  # noqa: E731
    todo = [s for s in students if s not in graded or not notebook(s).exists()]
    for student in todo:  # interrupted half-way, or to be graded again: nothing of before is kept
        shutil.rmtree(notebook(student).parent, ignore_errors=True)
    return todo


def _results(course: Path, summary: dict, exercise: GradedExercise) -> None:
    """Who was graded, each one's problems, the class's signs of cheating; the summary's file."""
    reports = report_dir(course)
    graded = workers_mod.graded_in_gradebook(course, list(summary["students"]), exercise)
    for student, info in summary["students"].items():
        info["graded"] = (
            student in graded and workers_mod.autograded_notebook(course, student, exercise).exists()
        )
        record = exercise.records(reports) / f"{student}.json"
        if record.exists():
            info["problems"] = json.loads(record.read_text()).get("problems", [])
    seconds = end_checks_seconds(summary["seconds"])  # a share of the grading time, at least a floor
    signs = suspicious.collect_findings(course, seconds=seconds, exercise=exercise)  # flags, copied answers
    summary["signs"] = str(suspicious.write(course, signs, exercise))
    summary["not_compared"] = sorted({s for e in signs if e.kind == NOT_COMPARED for s in e.students})
    summary["suspicious"] = len(suspicious.by_student([s for s in signs if s.kind != NOT_COMPARED]))
    exercise.batch_files(reports)[2].write_text(json.dumps(summary, indent=1))


class BatchError(Exception):
    """What stops a batch before it starts, said for the TA."""


def _on_cluster(
    course: Path,
    exercise: GradedExercise,
    todo: list[str],
    students: list[str],
    scheduler: str,
    extra: list[str],
    progress: Progress,
) -> None:
    """The work on the cluster's workers, each task's results recorded as they come back."""
    logs = exercise.batch_files(report_dir(course))[1]
    recorder = Recorder(course, exercise, students, logs / "finish.log")
    try:
        cluster.grade(
            course, exercise, todo, scheduler=scheduler, extra=extra, progress=progress, staged=recorder.add
        )
    finally:
        recorded = recorder.finish()
    progress.note(f"recorded {len(recorded)} results in the gradebook")


def _students(course: Path, exercise: GradedExercise) -> list[str]:
    submitted, name = course / "submitted", exercise.assignment
    if not submitted.is_dir():
        return []
    return sorted(p.name for p in submitted.iterdir() if (p / name).is_dir() or (p / name).is_symlink())


def _preflight(course: Path, student: str, exercise: GradedExercise) -> list[str]:
    folder = course / "submitted" / student / exercise.assignment
    release_nb = course / "release" / exercise.assignment / f"{exercise.notebook}.ipynb"
    notes = intake.replace_non_regular(folder, release_nb)  # before anything reads or copies it
    notes += check_submission(folder, exercise.notebook, release_nb).notes
    if exercise is spec.NINJA:  # the rebuild's notes, bound to its notebook (a written one's: printed only)
        intake.save_notes(course, student, notes)
    return notes


def _append_worker_logs(log: Path, folder: Path) -> None:
    """nbgrader's own output, after the one-line-per-submission part."""
    with open(log, "a") as out:
        for part in sorted(folder.glob("worker-*.log")):
            out.write(f"\n===== nbgrader output: {part.name} =====\n")
            out.write(part.read_text(errors="replace"))


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="backprop-ninja grade", description=__doc__.splitlines()[0])
    ap.add_argument("course", nargs="?", default=".")
    ap.add_argument("--force", action="store_true", help="grade every submission again")
    ap.add_argument(
        "--assignment",
        action="append",
        help=f"an assignment to grade: {spec.ASSIGNMENT} (the default), or one written by `backprop-ninja "
        "new`; give it again to grade several in one batch, each with its own records and reports",
    )
    ap.add_argument("--workers", type=int, default=None, help="parallel graders (default: all cores)")
    ap.add_argument("--quiet", action="store_true", help="plain lines instead of a progress bar")
    ap.add_argument("--scheduler", help="grade on a Dask cluster: the scheduler's address, tcp://HOST:8786")
    ap.add_argument(
        "--allow-unsandboxed",
        action="store_true",
        help="grade even where bubblewrap cannot start: student code then runs WITHOUT the sandbox",
    )
    args, extra = ap.parse_known_args(argv)  # anything else goes to nbgrader (--Execute.timeout=...)
    course = Path(args.course).resolve()
    refused, warned = unsandboxed.before_batch(course, args.allow_unsandboxed)
    if refused:
        print(refused, file=sys.stderr)
        return 2
    if warned:
        print(warned, file=sys.stderr)
        extra.append(unsandboxed.ALLOW_FLAG)
    try:  # every assignment known before any is graded
        exercises = [_exercise(course, a) for a in args.assignment or [spec.ASSIGNMENT]]
    except BatchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    graded_all = True
    for exercise in exercises:
        if len(exercises) > 1:
            print(f"== {exercise.assignment} ==")
        options = dict(force=args.force, workers=args.workers, quiet=args.quiet, scheduler=args.scheduler)
        try:
            summary = run(course, nbgrader_args=extra, assignment=exercise.assignment, **options)
        except BatchError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            print("stopped: run the same command again to grade the rest", file=sys.stderr)
            return 130
        graded_all = _said(summary, exercise.batch_files(report_dir(course))[0]) and graded_all
    return 0 if graded_all else 1


def _said(summary: dict, log: Path) -> bool:
    """Each student's state and notes, the signs of cheating; whether everyone was graded."""
    for student, info in summary["students"].items():
        state = "graded" if info["graded"] else f"NOT GRADED (see {log})"
        print(f"{for_log(student)}: {state}")
        for note in info["preflight"] + info.get("problems", []):
            print(f"  - {for_log(html.unescape(note), 500)}")
    if summary.get("suspicious"):
        print(f"{summary['suspicious']} submission(s) with signs of cheating for a TA: {summary['signs']}")
    return all(i["graded"] for i in summary["students"].values())
