"""Which assignments the kit's grading acts on: its own (spec.ASSIGNMENT), and an exercise written
from its definition by `backprop-ninja new` (its source notebook carries the definition in its
metadata, grader/exercise/graded.py). Another assignment of the same course is graded as plain
nbgrader grades it: no rebuild from the source notebook, no replay, no gradient table, no warm
kernel made for the kit's first cells. What keeps every assignment safe stays on for all of them:
the sandboxed kernel and its bounds (LimitedExecute), inert outputs (NeutraliseOutputs), the
intake's checks of links; none of them changes a score."""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from pathlib import Path

import nbformat
from nbformat.notebooknode import NotebookNode
from nbgrader.coursedir import CourseDirectory

from ..exercise import spec
from ..exercise.graded import GradedExercise


def kit_assignment(resources: dict | None) -> bool:
    """Whether nbgrader is converting the kit's own assignment (its resources say which)."""
    return ((resources or {}).get("nbgrader") or {}).get("assignment") == spec.ASSIGNMENT


def source_notebook(resources: dict, config) -> Path:
    """The instructor's notebook of the one nbgrader is converting (never the student's copy)."""
    info = resources["nbgrader"]
    coursedir = CourseDirectory(config=config)
    return (
        Path(coursedir.root) / coursedir.source_directory / info["assignment"] / f"{info['notebook']}.ipynb"
    )


def instructor_notebook(path: Path) -> NotebookNode:
    """The instructor's notebook at `path`, read once per version of the file in a grading
    process: every submission's rebuild and the check of its cells read it. One object for
    every submission: read it, and change only copies of it."""
    st = path.stat()
    return _read(str(path), st.st_mtime_ns, st.st_size)


@lru_cache(maxsize=4)
def _read(path: str, _mtime_ns: int, _size: int) -> NotebookNode:
    return nbformat.read(path, as_version=4)


def graded_exercise(resources: dict | None, config) -> GradedExercise | None:
    """The exercise the kit grades in this conversion: Backprop Ninja, a written one, or None."""
    if kit_assignment(resources):
        return spec.NINJA
    info = (resources or {}).get("nbgrader") or {}
    if not info.get("assignment") or not info.get("notebook"):
        return None
    path = source_notebook(resources, config)
    try:
        return _written(str(path), path.stat().st_mtime_ns, info["assignment"], info["notebook"])
    except OSError:
        return None


def course_exercise(course: Path, assignment: str) -> GradedExercise | None:
    """The exercise the kit grades as `assignment` of the course folder `course` (the batch's
    view: source/ where nbgrader's default puts it), or None."""
    if assignment == spec.ASSIGNMENT:
        return spec.NINJA
    for path in sorted((course / "source" / assignment).glob("*.ipynb")):
        found = _written(str(path), path.stat().st_mtime_ns, assignment, path.stem)
        if found is not None:
            return found
    return None


class NotAnExercise(LookupError):
    """An assignment the kit does not grade; the message says so for a TA or an instructor."""


def required_exercise(course: Path, assignment: str) -> GradedExercise:
    """course_exercise, or NotAnExercise saying where it looked."""
    exercise = course_exercise(course, assignment)
    if exercise is None:
        raise NotAnExercise(
            f"{assignment} is not an exercise the kit grades in {course / 'source'} "
            f"({spec.ASSIGNMENT}, or one written by `backprop-ninja new`)"
        )
    return exercise


@lru_cache(maxsize=16)
def _written(path: str, mtime: int, assignment: str, notebook: str) -> GradedExercise | None:
    written = GradedExercise.from_metadata(instructor_notebook(Path(path)).metadata)
    return written and replace(written, assignment=assignment, notebook=notebook)
