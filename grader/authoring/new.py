"""`backprop-ninja new EXERCISE.py COURSE`: an exercise written from its definition alone into a
course folder: source/NAME/NAME.ipynb (the instructor notebook, grader/authoring/notebook.py) and
the files its setup reads. A new folder becomes a course (the kit's nbgrader_config.py, as `init`
writes it); an existing course gets the assignment beside its others. The definition's solutions
are checked against autograd first (check.py), so a wrong one never reaches a notebook. Then
`nbgrader generate_assignment NAME` and everything after it work as for any assignment."""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import sys
from pathlib import Path

import nbformat

from ..exercise.data import DataError, ensure_names
from ..exercise.definition import Definition
from ..new_course.init import InitError, config_text
from .check import problems
from .notebook import instructor_notebook

SHIPPED_IN = "grader.exercise.definitions"
SHIPPED = ("gpt_block",)  # written by `new`; backprop_ninja's notebook is the lecture's, by hand


class NewError(Exception):
    """What stops an exercise from being written, said for the instructor."""


def load_definition(path: Path, name: str | None = None) -> Definition:
    """The Definition in the file (the one named `name` when it holds several); a bare name such
    as `gpt_block` is one of the kit's own (grader/exercise/definitions/)."""
    if not path.exists() and path.name in SHIPPED:
        module = importlib.import_module(f"{SHIPPED_IN}.{path.name}")
    else:
        spec = importlib.util.spec_from_file_location(f"_exercise_{path.stem}", path)
        if spec is None or not path.is_file():
            raise NewError(
                f"{path}: not a Python file, nor one of the kit's exercises ({', '.join(SHIPPED)})"
            )
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)  # the instructor's own file
    found = {v.name: v for v in vars(module).values() if isinstance(v, Definition)}
    if name is not None and name not in found:
        raise NewError(f"{path} defines no exercise named {name!r} (it has: {', '.join(found) or 'none'})")
    if name is None and len(found) != 1:
        raise NewError(f"{path} defines {len(found)} exercises ({', '.join(found)}): say which with --name")
    return found[name] if name else next(iter(found.values()))


def write_exercise(
    d: Definition, course: Path, *, beside: Path | None, course_id: str | None = None
) -> list[str]:
    """Write the assignment (and the course, when `course` is not one yet); returns what it did.
    `beside`: the folder of the definition's file, where its data files are (None: the kit's)."""
    folder = course / "source" / d.name
    if folder.exists() and any(folder.iterdir()):
        raise NewError(f"{folder} exists and is not empty: remove it to write {d.name} again")
    done = []
    if not (course / "nbgrader_config.py").exists():
        if course.exists() and any(course.iterdir()):
            raise NewError(f"{course} is neither a course (no nbgrader_config.py) nor an empty folder")
        course.mkdir(parents=True, exist_ok=True)
        (course / "nbgrader_config.py").write_text(config_text(course_id or d.name))
        done.append(f"{course}/nbgrader_config.py (course id {course_id or d.name})")
    folder.mkdir(parents=True, exist_ok=True)
    try:
        done += [_copy(f, beside, folder) for f in d.files]
        wrong = problems(d, folder)
        if wrong:
            raise NewError(f"{d.name}: the solutions do not match autograd:\n  " + "\n  ".join(wrong))
    except BaseException:
        shutil.rmtree(folder)
        raise
    nbformat.write(instructor_notebook(d), folder / f"{d.name}.ipynb")
    return [
        *done,
        f"{folder}/{d.name}.ipynb (the instructor notebook: {len(d.gradients())} graded gradients)",
    ]


def _copy(name: str, beside: Path | None, folder: Path) -> str:
    if name == "names.txt" and (beside is None or not (beside / name).exists()):
        try:
            names = ensure_names(folder / name)
        except DataError as e:
            raise NewError(f"names.txt: {e}") from e
        return f"{folder}/names.txt ({names.n_names} names, from {names.origin})"
    if beside is None or not (beside / name).is_file():
        raise NewError(f"{name}: the setup reads it, but it is not beside the definition ({beside})")
    shutil.copyfile(beside / name, folder / name)
    return f"{folder}/{name}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="backprop-ninja new", description=__doc__.splitlines()[0])
    ap.add_argument("exercise", type=Path, help=f"a Python file with the exercise's Definition, or {SHIPPED}")
    ap.add_argument("course", type=Path, help="a course folder (made when new or empty)")
    ap.add_argument("--name", help="which exercise, when the file defines several")
    ap.add_argument(
        "--course-id", help="nbgrader's course id for a new course (default: the exercise's name)"
    )
    args = ap.parse_args(argv)
    try:
        d = load_definition(args.exercise.resolve(), args.name)
        beside = args.exercise.resolve().parent if args.exercise.exists() else None
        done = write_exercise(d, args.course.resolve(), beside=beside, course_id=args.course_id)
    except (NewError, InitError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print("made " + "\n     ".join(done))
    print(
        f"next, from {args.course}:\n"
        f"  nbgrader generate_assignment {d.name}   # release/{d.name}/ for the students"
    )
    return 0
