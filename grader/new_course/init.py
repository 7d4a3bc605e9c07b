"""`backprop-ninja init COURSE [--course-id ID]`: a new nbgrader course folder with the kit's
assignment, from the installed package, anywhere on the machine (a JupyterHub's shared course
folder, a home directory). It holds what this repository's course holds before `make release`:
nbgrader_config.py (the course id set), source/backprop_ninja/ with the instructor notebook and
names.txt (NAMES_TXT, else downloaded and checked, else the offline list; grader/exercise/data.py).
Other assignments go beside it in source/; the kit grades only its own (preprocessors/scope.py)."""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from importlib import resources
from pathlib import Path

from ..exercise import spec
from ..exercise.data import DataError, ensure_names

COURSE_ID_LINE = re.compile(r'^c\.CourseDirectory\.course_id = "[^"\n]*"$', re.MULTILINE)
VALID_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")  # a folder name in the exchange, too


class InitError(Exception):
    """What stops a course from being made, said for the instructor."""


def config_text(course_id: str) -> str:
    """The kit's nbgrader_config.py with this course id."""
    if not VALID_ID.fullmatch(course_id):
        raise InitError(f"course id {course_id!r}: letters, digits, '_', '.' and '-' only (64 at most)")
    text = resources.files(__package__).joinpath("nbgrader_config.py").read_text()
    text, found = COURSE_ID_LINE.subn(f"c.CourseDirectory.course_id = {course_id!r}".replace("'", '"'), text)
    if found != 1:
        raise InitError("the kit's nbgrader_config.py has no course id line to set")
    return text


def make_course(course: Path, *, course_id: str, names_source: str | None = None) -> list[str]:
    """Write the course; returns what it did, a line each. An existing non-empty folder is
    never written into."""
    if course.exists() and (not course.is_dir() or any(course.iterdir())):
        raise InitError(f"{course} exists and is not an empty folder: choose a new one")
    config = config_text(course_id)
    assignment = course / "source" / spec.ASSIGNMENT
    assignment.mkdir(parents=True)
    (course / "nbgrader_config.py").write_text(config)
    with resources.as_file(resources.files(__package__).joinpath(f"{spec.NOTEBOOK}.ipynb")) as nb:
        shutil.copyfile(nb, assignment / f"{spec.NOTEBOOK}.ipynb")
    try:
        names = ensure_names(assignment / "names.txt", source=names_source)
    except DataError as e:
        raise InitError(f"names.txt: {e}") from e
    return [
        f"{course}/nbgrader_config.py (course id {course_id})",
        f"{assignment}/{spec.NOTEBOOK}.ipynb (the instructor notebook)",
        f"{assignment}/names.txt ({names.n_names} names, from {names.origin})",
    ]


def next_steps(course: Path) -> str:
    return (
        f"next, from {course} (with this virtualenv's bin/ on PATH: nbgrader runs alembic):\n"
        f"  nbgrader generate_assignment {spec.ASSIGNMENT}   # release/{spec.ASSIGNMENT}/ for the students\n"
        "  backprop-ninja grade .                             # grade submitted/ on every core\n"
        "  backprop-ninja report .                            # the table, the class report, the CSVs\n"
        "  jupyter lab                                        # the formgrader, at /formgrader"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="backprop-ninja init", description=__doc__.splitlines()[0])
    ap.add_argument("course", type=Path, help="the new course folder (must not exist, or be empty)")
    ap.add_argument("--course-id", default=spec.ASSIGNMENT, help="nbgrader's course id (default %(default)s)")
    ap.add_argument("--names-txt", help="a names.txt to copy (default: $NAMES_TXT, else downloaded)")
    args = ap.parse_args(argv)
    course = args.course.resolve()
    try:
        done = make_course(course, course_id=args.course_id, names_source=args.names_txt)
    except InitError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print("made " + "\n     ".join(done))
    print(next_steps(course))
    return 0
