"""Rebuild a submission on the instructor's notebook before it runs.

Students delete, duplicate, move and edit cells, change their types, grade ids and
metadata. nbgrader restores only the locked cells it still finds. Here the notebook that
runs is the instructor's, cell for cell, with the student's answer cells put in their
places and every cell the student added kept after the cell it followed. What was changed
is said in a note at the top, which the student sees in the feedback.
"""

from __future__ import annotations

import copy
import html

import nbformat
from nbconvert.exporters.exporter import ResourcesDict
from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import ClearSolutions, NbGraderPreprocessor

from ..exercise.cells import nbgrader_meta
from ..incoming.intake import notes_for
from ..quote import for_log, for_markdown
from .scope import graded_exercise, instructor_notebook, source_notebook

__all__ = ["NOTE_MARK", "RebuildFromSource", "rebuild"]
NOTE_MARK = "backprop_ninja_rebuild_note"


def rebuild(
    student: NotebookNode, source: NotebookNode, *, earlier: list[str] = ()
) -> tuple[NotebookNode, list[str]]:
    """`earlier`: the kit's notes from before (grader/incoming/intake.py); the only other notes are the
    ones made here. A student's cell that looks like a note is just a cell of theirs."""
    known = {nbgrader_meta(c).get("grade_id"): c for c in source.cells if nbgrader_meta(c).get("grade_id")}
    answers = {gid for gid, c in known.items() if nbgrader_meta(c).get("solution")}
    notes: list[str] = []
    taken, after, seen = _sort_cells(student, known, answers, notes)
    missing_locked = [gid for gid in known if gid not in seen and gid not in answers]
    if missing_locked:
        notes.append(f"{len(missing_locked)} locked or test cells were missing or changed and were restored")
    out = _assemble(source, answers, taken, after, notes)
    if notes or earlier:
        out.cells.insert(0, _note_cell(earlier, notes))
    return out, notes


def _sort_cells(student: NotebookNode, known: dict, answers: set, notes: list[str]):
    """(the student's answer cell by grade id, their own cells by the known cell they follow,
    the known cells present)."""
    taken: dict[str, NotebookNode] = {}
    after: dict[str | None, list[NotebookNode]] = {}
    seen: set[str] = set()
    anchor = None
    for cell in student.cells:
        gid = nbgrader_meta(cell).get("grade_id")
        if gid is not None and not isinstance(gid, str):
            gid = repr(gid)[:80]  # a student's list or number: an unknown grade id, not a crash
        if gid in answers and gid not in taken:
            if cell.get("cell_type") != "code":
                notes.append(
                    f"your answer cell `{gid}` had been turned into a {for_markdown(cell.get('cell_type'))} "
                    "cell: it was run as code"
                )
            taken[gid] = cell
            seen.add(gid)  # a second copy is noted as removed
            anchor = gid
        elif gid in known:
            if gid in seen:
                notes.append(f"a copy of the cell `{gid}` was removed")
            seen.add(gid)
            anchor = gid
        else:
            if gid:
                notes.append(
                    f"a cell with the unknown grade id {for_markdown(gid)} was kept as a cell of your own"
                )
            kept = (
                nbformat.v4.new_code_cell(cell.get("source", ""))
                if cell.get("cell_type") == "code"
                else nbformat.v4.new_markdown_cell(cell.get("source", ""))
            )
            after.setdefault(anchor, []).append(kept)
    return taken, after, seen


def _assemble(source: NotebookNode, answers: set, taken: dict, after: dict, notes: list[str]) -> NotebookNode:
    """The instructor's notebook, with the student's answers and own cells put in place."""
    stub_by_gid = _stubs(source, answers)
    out = nbformat.v4.new_notebook(metadata=copy.deepcopy(source.metadata))
    out.cells.extend(after.get(None, []))
    for cell in source.cells:
        gid = nbgrader_meta(cell).get("grade_id")
        if gid in answers:
            mine = taken.get(gid)
            new = copy.deepcopy(stub_by_gid[gid])
            if mine is None:
                notes.append(
                    f"your answer cell `{gid}` was missing (deleted, or its grade id changed): "
                    "the empty answer cell was put back; code of yours elsewhere still runs"
                )
            else:
                new.source = mine.get("source", "")
            new.cell_type = "code"
            new.outputs, new.execution_count = [], None
        else:
            new = copy.deepcopy(cell)
            if new.cell_type == "code":
                new.outputs, new.execution_count = [], None
        out.cells.append(new)
        out.cells.extend(after.get(gid, []))
    return out


def _stubs(source: NotebookNode, answers: set) -> dict[str, NotebookNode]:
    """The answer cells as the release has them (nbgrader's ClearSolutions), by grade id; copies:
    `source` is shared by every submission (scope.instructor_notebook)."""
    cells = [copy.deepcopy(c) for c in source.cells if nbgrader_meta(c).get("grade_id") in answers]
    nb = nbformat.v4.new_notebook(cells=cells, metadata=copy.deepcopy(source.metadata))
    stubs = ClearSolutions().preprocess(nb, ResourcesDict())[0]
    return {nbgrader_meta(c)["grade_id"]: c for c in stubs.cells}


def _note_cell(earlier: list[str], notes: list[str]) -> NotebookNode:
    """The kit's note at the top: the intake's notes, then the rebuild's."""
    text = "**Autograder note.**"
    if earlier:
        text += "\n\n" + "\n".join(f"- {n}" for n in earlier)
    if notes:
        text += "\n\nYour notebook was rebuilt on the assignment before grading:\n\n" + "\n".join(
            f"- {n}" for n in notes
        )
    note = nbformat.v4.new_markdown_cell(text)
    note.metadata[NOTE_MARK] = True
    return note


class RebuildFromSource(NbGraderPreprocessor):
    """Sanitize step: run before nbgrader's OverwriteCells."""

    def preprocess(self, nb: NotebookNode, resources: ResourcesDict) -> tuple[NotebookNode, ResourcesDict]:
        if graded_exercise(resources, self.config) is None:
            return nb, resources
        info = resources["nbgrader"]
        source = instructor_notebook(source_notebook(resources, self.config))
        earlier = notes_for(info["student"])
        rebuilt, notes = rebuild(nb, source, earlier=earlier)
        for n in earlier + notes:
            self.log.warning("%s: %s", for_log(info["student"]), for_log(html.unescape(n), 500))
        resources.setdefault("backprop_ninja", {})["rebuild_notes"] = notes
        return rebuilt, resources
