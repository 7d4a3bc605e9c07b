"""`backprop-ninja check [NOTEBOOK]`: with a notebook, the student's own check (the table the
feedback opens with: each gradient's points, "right", the carried-credit note or the hint);
without one, whether the bubblewrap sandbox can grade here (grader/confine/check.py)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from ..exercise import spec
from ..exercise.graded import GradedExercise
from ..reports.verdict_rows import Row, row

SEED = 20260  # any seed: the verdicts do not depend on it, the numbers in the hints do


class CheckError(Exception):
    """What stops the check, said for the student."""


def load_notebook(notebook) -> dict:
    """A notebook file's JSON, or the dict itself (Colab hands one over), sources joined as
    nbformat joins them."""
    nb = json.loads(Path(notebook).read_text()) if isinstance(notebook, (str, os.PathLike)) else notebook
    cells = nb.get("cells") if isinstance(nb, dict) else None
    if not isinstance(cells, list):
        raise CheckError("this is not a Jupyter notebook (no cells)")
    for cell in cells:
        if isinstance(cell.get("source"), list):
            cell["source"] = "".join(cell["source"])
    return nb


def load_cells(notebook) -> list[dict]:
    return load_notebook(notebook)["cells"]


def exercise_of(nb: dict) -> GradedExercise:
    """Backprop Ninja, or the exercise written by `backprop-ninja new` that the notebook carries
    (its metadata: the definition, never a solution)."""
    return GradedExercise.from_metadata(nb.get("metadata") or {}) or spec.NINJA


def find_names_txt(notebook, given: str | None = None) -> Path:
    """names.txt as the notebook's data cell left it beside the notebook, or as given."""
    here = Path(notebook).parent if isinstance(notebook, (str, os.PathLike)) else Path.cwd()
    for path in (given, here / "names.txt", os.environ.get("NAMES_TXT")):
        if path and Path(path).is_file():
            return Path(path)
    raise CheckError(
        f"names.txt is not beside the notebook ({here}): run the notebook's data cell once (it "
        "downloads it there), or give its place with --names-txt"
    )


def check(notebook, names_txt: str | None = None, seed: int = SEED) -> str:
    """The table for a notebook (a file, or Colab's JSON): names.txt found where the exercise
    reads it (Backprop Ninja's, or a written one's files), the judge's record, its rows."""
    nb = load_notebook(notebook)
    exercise = exercise_of(nb)
    here = Path(notebook).parent if isinstance(notebook, (str, os.PathLike)) else Path.cwd()
    names = None
    if exercise is spec.NINJA or "names.txt" in exercise.definition.files:
        names = find_names_txt(notebook, names_txt)
    return table(
        check_notebook(nb, names_txt=names, folder=names.parent if names else here, seed=seed), exercise
    )


def check_notebook(notebook, *, names_txt: Path | None, folder: Path | None = None, seed: int = SEED) -> dict:
    """The judge's record for this notebook (JudgeRecord.to_json()), as the grader makes it; a
    written exercise's inputs from its setup cells, run in `folder` (its files' folder)."""
    from ..replay.client import launch_plain
    from ..settings import JudgeSettings
    from ..verdicts.judge import judge_submission

    nb = load_notebook(notebook)
    exercise = exercise_of(nb)
    record = judge_submission(
        nb["cells"],
        student="you",
        settings=JudgeSettings(seed=seed),
        names_txt=names_txt,
        exercise=exercise,
        folder=folder or (names_txt.parent if names_txt else Path.cwd()),
        launcher=launch_plain,
    )
    return record.to_json()


def rows(record: dict, exercise: GradedExercise = spec.NINJA) -> list[Row]:
    verdicts = record.get("verdicts", {})
    return [row(g, None, verdicts.get(g.grade_id)) for g in exercise.graded]


def table(record: dict, exercise: GradedExercise = spec.NINJA) -> str:
    """The rows as text, one a gradient, in backward order, and the total."""
    out = [f"{'ex':<3}{'gradient':<17}{'grade id':<22}{'points':>9}  verdict"]
    for r in rows(record, exercise):
        points = f"{r.score or 0:g} / {r.max_score:g}"
        out.append(f"{r.exercise:<3}{r.name:<17}{r.grade_id:<22}{points:>9}  {r.verdict}")
    total = f"{record.get('score', 0):g} / {record.get('max_score', exercise.total_points()):g}"
    out.append(f"{'':<3}{'':<17}{'total':<22}{total:>9}")
    out += [f"note: {p}" for p in record.get("problems", [])]
    return "\n".join(out)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="backprop-ninja check",
        description="With a notebook: the grader's verdicts for it, here, offline (your own check). "
        "Without: whether the bubblewrap sandbox can grade on this machine, and if not why.",
    )
    ap.add_argument("notebook", nargs="?", help="your backprop_ninja.ipynb")
    ap.add_argument("--names-txt", help="names.txt, if not beside the notebook")
    ap.add_argument("--seed", type=int, default=SEED, help="the fresh inputs' seed (default %(default)s)")
    args = ap.parse_args(argv)
    if args.notebook is None:
        from ..confine.check import main as sandbox_check

        return sandbox_check([])
    try:
        said = check(args.notebook, args.names_txt, args.seed)
    except (CheckError, OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"{args.notebook}: replayed on fresh inputs, as the grader does")
    print(said)
    return 0
