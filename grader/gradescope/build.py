"""`backprop-ninja gradescope build OUT.zip [--assignment NAME]`: the zip a course uploads as
its Gradescope autograder, for one assignment the kit grades (Backprop Ninja by default, or an
exercise written by `backprop-ninja new`). Gradescope extracts it into /autograder/source:

    setup.sh, run_autograder    at the top, as Gradescope requires (scripts.py)
    requirements.txt            the versions of this virtualenv, pinned (the same judge, the same scores),
                                bounded where an image's Python cannot take them (requirements.py)
    requirements-torch.txt      torch's CPU build, from PyTorch's index, installed first
    gradescope.json             the run's settings (visibility of the tests, the build's Python and
                                the Pythons the requirements are written for, which packages each
                                cannot take at the build's version, the assignment, whether to
                                grade when the sandbox cannot start: no, by default)
    kit/                        pyproject.toml and the grader package
    course/                     nbgrader_config.py and source/ (the instructor notebook, and the
                                files the assignment's setup reads: names.txt)

The zip is the instructor's (it holds the solutions, as source/ does); never in it: the
virtualenv, the instructor's gradebook, anyone's submissions or grades.
"""

from __future__ import annotations

import json
import os
import platform
import stat
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from ..exercise import spec
from ..exercise.graded import GradedExercise
from ..preprocessors.scope import NotAnExercise, required_exercise
from . import requirements, scripts
from .requirements import Pin

PACKAGE = Path(__file__).resolve().parents[1]  # the grader package this process runs
SKIPPED_PARTS = {"__pycache__", ".ipynb_checkpoints", ".pytest_cache"}
SKIPPED_SUFFIXES = {".pyc", ".pyo"}
EXECUTABLE = 0o755


@dataclass
class Entry:
    """One file of the zip: its path there, and its bytes or the file they come from."""

    name: str
    source: Path | None = None
    data: bytes | None = None
    executable: bool = False

    def content(self) -> bytes:
        return self.data if self.data is not None else self.source.read_bytes()


@dataclass
class Plan:
    entries: list[Entry] = field(default_factory=list)

    @property
    def names(self) -> list[str]:
        return [e.name for e in self.entries]


class BuildError(ValueError):
    """The zip cannot be built as asked (an assignment the kit does not grade, a missing file)."""


def find_exercise(course: Path, assignment: str) -> GradedExercise:
    try:
        return required_exercise(course, assignment)
    except NotAnExercise as e:
        raise BuildError(str(e)) from None


def data_files(exercise: GradedExercise) -> tuple[str, ...]:
    """What the exercise's setup reads beside its notebook: a written exercise's definition
    lists them; Backprop Ninja's notebook reads names.txt."""
    return exercise.definition.files or (("names.txt",) if exercise is spec.NINJA else ())


def find_data(course: Path, assignment: str, name: str) -> Path:
    """The course's own copy of a data file; names.txt else NAMES_TXT's (as `make data` would use)."""
    candidates = [course / "source" / assignment / name]
    if name == "names.txt":
        candidates.append(os.environ.get("NAMES_TXT"))
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    if name == "names.txt":
        raise BuildError(
            f"no names.txt in {course / 'source' / assignment} and NAMES_TXT is not set: run `make data`"
        )
    raise BuildError(f"no {name} in {course / 'source' / assignment}: {assignment}'s setup reads it")


def _tree(
    folder: Path, prefix: str, *, skip_names: tuple[str, ...] = (), skip: frozenset = frozenset()
) -> list[Entry]:
    out = []
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if path.is_symlink() or not path.is_file() or path.name in skip_names or path in skip:
            continue
        if SKIPPED_PARTS & set(rel.parts) or path.suffix in SKIPPED_SUFFIXES:
            continue
        out.append(Entry(f"{prefix}/{rel.as_posix()}", source=path))
    return out


def plan(
    *,
    course: Path,
    assignment: str = spec.ASSIGNMENT,
    visibility: str = "visible",
    pins: list[Pin] | None = None,
    allow_unsandboxed: bool = False,
) -> Plan:
    """Every file of the zip, in order; nothing is read yet but the exercise (a written one's
    source notebook) and its data files' locations. `allow_unsandboxed`: grade where bubblewrap
    cannot start (run.py), else refuse."""
    kit_root = PACKAGE.parent
    course_source = course / "source"
    exercise = find_exercise(course, assignment)
    # found before anything is packed: a missing file fails the build, not every submission
    data = {name: find_data(course, exercise.assignment, name) for name in data_files(exercise)}
    pins = pins or requirements.installed_pins()
    settings = {
        "visibility": visibility,
        "python": platform.python_version(),
        "pythons": list(requirements.PYTHONS),
        "not_exact": requirements.not_exact(pins),  # for setup.sh's same_python.py
        "assignment": exercise.assignment,
        "allow_unsandboxed": allow_unsandboxed,
    }
    entries = [
        Entry("setup.sh", data=scripts.SETUP_SH.encode(), executable=True),
        Entry("run_autograder", data=scripts.RUN_AUTOGRADER.encode(), executable=True),
        Entry("requirements.txt", data=requirements.requirements_txt(pins).encode()),
        Entry("requirements-torch.txt", data=requirements.torch_txt(pins).encode()),
        Entry("gradescope.json", data=json.dumps(settings, indent=1).encode()),
        Entry("kit/pyproject.toml", source=kit_root / "pyproject.toml"),
        *_tree(PACKAGE, "kit/grader"),
        Entry("course/nbgrader_config.py", source=course / "nbgrader_config.py"),
        # names.txt is data, not source: only the assignment's own goes in, with its other files
        *_tree(
            course_source,
            "course/source",
            skip_names=("names.txt",),
            skip=frozenset(course_source / exercise.assignment / name for name in data),
        ),
        *(Entry(f"course/source/{exercise.assignment}/{name}", source=path) for name, path in data.items()),
    ]
    return Plan(entries)


def write_zip(the_plan: Plan, out: Path) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".part")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for entry in the_plan.entries:
            info = zipfile.ZipInfo(entry.name, date_time=(2020, 1, 1, 0, 0, 0))  # same bytes each build
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = (stat.S_IFREG | (EXECUTABLE if entry.executable else 0o644)) << 16
            zf.writestr(info, entry.content())
    tmp.replace(out)
    return out


def build(
    *,
    out: Path,
    course: Path,
    assignment: str = spec.ASSIGNMENT,
    visibility: str = "visible",
    allow_unsandboxed: bool = False,
) -> Path:
    the_plan = plan(
        course=course.resolve(),
        assignment=assignment,
        visibility=visibility,
        allow_unsandboxed=allow_unsandboxed,
    )
    return write_zip(the_plan, out)
