"""A course folder holding an exercise written by `backprop-ninja new`, as far as the Gradescope
zip reads it: its source notebook with the definition in its metadata, and its data files."""

from __future__ import annotations

import shutil
from pathlib import Path

import nbformat

from grader.exercise.definition import Definition
from grader.exercise.graded import METADATA_KEY

from conftest import ROOT


def add_written(course: Path, definition: Definition, files: dict[str, str] | None = None) -> Path:
    """source/NAME/NAME.ipynb (and `files` beside it) in `course`; its nbgrader_config.py if none."""
    folder = course / "source" / definition.name
    folder.mkdir(parents=True)
    nb = nbformat.v4.new_notebook(metadata={METADATA_KEY: {"definition": definition.to_json()}})
    nbformat.write(nb, folder / f"{definition.name}.ipynb")
    for name, text in (files or {}).items():
        (folder / name).write_text(text)
    if not (course / "nbgrader_config.py").exists():
        shutil.copy(ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
    return course
