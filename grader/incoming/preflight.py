"""Before nbgrader reads a submission: make every submitted notebook readable, or replace it
by the empty assignment with a note saying why, so one bad file costs only its student.

nbgrader itself stops a student's grading at a file it cannot parse and gives no feedback.
Here: a notebook under another name is graded under the expected one; old formats and
stray bytes are converted; huge outputs are dropped (the grader re-runs the notebook);
an unreadable file is kept beside as `<name>.unreadable` and graded as empty.

Bounded (limits in grader/settings.py), as every analysis of a student's text: a file over
NOTEBOOK_BYTES is not even read and one of more than NOTEBOOK_CELLS cells is not parsed further
(nbformat's validation costs each cell), both graded as empty; a cell whose source is over
NOTEBOOK_CELL_CHARS is emptied, not graded, with a note; past PREFLIGHT_SECONDS (looked at
between the steps and at each cell, nothing interrupted) the notebook is graded as empty.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from ..quote import for_markdown
from ..settings import HUGE_BYTES, NOTEBOOK_BYTES, NOTEBOOK_CELL_CHARS, NOTEBOOK_CELLS, PREFLIGHT_SECONDS
from ..verdicts.budget import Budget


@dataclass
class Preflight:
    student: str
    notes: list[str] = field(default_factory=list)
    unreadable: bool = False


def _read(path: Path) -> tuple[nbformat.NotebookNode, list[str]]:
    notes, budget = [], Budget("notebook", seconds=PREFLIGHT_SECONDS)
    size = path.stat().st_size
    if size > NOTEBOOK_BYTES:  # not even read: nbgrader would hold several copies in memory
        raise ValueError(
            f"the file is {size / 2**20:.0f} MB, over the {NOTEBOOK_BYTES // 2**20} MB a notebook may have"
        )
    raw = path.read_bytes()
    if not raw.strip():
        raise ValueError("the file is empty")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("utf-8", errors="replace")
        notes.append("the file was not valid UTF-8: unreadable characters were replaced")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"the file is not a notebook (not JSON: {e.msg} at line {e.lineno})") from None
    if not isinstance(data, dict) or "cells" not in data and "worksheets" not in data:
        raise ValueError("the file is JSON but not a notebook")
    if (cells := _cell_count(data)) > NOTEBOOK_CELLS:
        raise ValueError(f"the notebook has {cells:,} cells, over the {NOTEBOOK_CELLS:,} a notebook may have")
    version = data.get("nbformat")
    budget.spend()
    nb = nbformat.reads(text, as_version=4)
    if version != 4:
        notes.append(f"the notebook was in format {version}: it was converted to format 4")
    notes += _bound_cells(nb, budget)
    if len(raw) > HUGE_BYTES:
        for cell in nb.cells:
            if cell.get("cell_type") == "code":
                cell.outputs, cell.execution_count = [], None
            cell.pop("attachments", None)
        notes.append(
            f"the notebook was {len(raw) / 2**20:.0f} MB: its outputs were dropped (they are re-made)"
        )
    nbformat.validator.normalize(nb)
    budget.spend()
    nbformat.validate(nb)
    budget.spend()
    return nb, notes


def _cell_count(data: dict) -> int:
    """Cells of a notebook's JSON, format 4's or format 3's (in worksheets)."""
    sheets = [data] if "cells" in data else data.get("worksheets")
    sheets = [w.get("cells") for w in sheets if isinstance(w, dict)] if isinstance(sheets, list) else []
    return sum(len(cells) for cells in sheets if isinstance(cells, list))


def _bound_cells(nb: nbformat.NotebookNode, budget: Budget) -> list[str]:
    """A cell whose source is over NOTEBOOK_CELL_CHARS is emptied: no part of the kit would read
    it in time (nbgrader, the replay, the scan). The deadline is looked at each cell."""
    notes = []
    for i, cell in enumerate(nb.cells):
        budget.spend()
        if isinstance(cell.get("source"), str) and len(cell.source) > NOTEBOOK_CELL_CHARS:
            notes.append(
                f"cell {i + 1} has {len(cell.source):,} characters, over the {NOTEBOOK_CELL_CHARS:,} a cell "
                "may have: it was emptied and not graded"
            )
            cell.source = ""
            if cell.get("cell_type") == "code":
                cell.outputs, cell.execution_count = [], None
    return notes


def check_submission(folder: Path, notebook: str, release_nb: Path) -> Preflight:
    """Repair or replace FOLDER/NOTEBOOK.ipynb in place; the original is kept beside it."""
    result = Preflight(folder.parent.name)
    path = folder / f"{notebook}.ipynb"
    if not path.exists():
        others = sorted(p for p in folder.glob("*.ipynb") if p.is_file())
        if not others:
            result.notes.append(f"no notebook was submitted (expected {path.name})")
            return result
        chosen = max(others, key=lambda p: p.stat().st_size)
        shutil.copy(chosen, path)
        result.notes.append(
            f"your notebook {for_markdown(chosen.name)} was graded as {path.name}"
            + (f" ({len(others) - 1} other notebooks ignored)" if len(others) > 1 else "")
        )
    try:
        nb, notes = _read(path)
        result.notes += notes
    except Exception as e:  # any way of being unreadable
        path.replace(path.with_name(path.name + ".unreadable"))  # kept for the TA, not copied
        nb = nbformat.read(release_nb, as_version=4)
        reason = str(e) or type(e).__name__
        result.notes.append(
            f"your notebook could not be read ({for_markdown(reason)}); it was graded as the empty assignment"
        )
        result.unreadable = True
    if result.notes:  # the notes go to intake.py, never into the notebook (the student's to write)
        original = path.with_name(path.name + ".original")
        if not original.exists() and not result.unreadable:
            shutil.copy(path, original)
        nbformat.write(nb, path)
    return result
