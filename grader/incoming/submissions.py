"""Build student submissions from the release notebook: the demo's sample class and the
test corpus. A submission is the release notebook with each answer stub replaced by code
derived from the instructor's reference solution by explicit, checked text edits.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from ..exercise import spec
from ..exercise.cells import nbgrader_meta

_BEGIN, _END = "### BEGIN SOLUTION", "### END SOLUTION"
_STUB = re.compile(r"^(?P<indent>[ \t]*)# YOUR CODE HERE\n(?P=indent)raise NotImplementedError\(\)$", re.M)


def reference_answers(source_nb: nbformat.NotebookNode) -> dict[str, str]:
    """The reference solution region of each answer cell, by grade id, dedented to column 0."""
    answers = {}
    for cell in source_nb.cells:
        meta = nbgrader_meta(cell)
        if meta.get("solution") and _BEGIN in cell.source:
            lines = cell.source.split("\n")
            b = next(i for i, l in enumerate(lines) if l.strip() == _BEGIN)
            e = next(i for i, l in enumerate(lines) if l.strip() == _END)
            indent = len(lines[b]) - len(lines[b].lstrip())
            answers[meta["grade_id"]] = "\n".join(l[indent:] for l in lines[b + 1 : e])
    return answers


def fill(
    release_nb: nbformat.NotebookNode, answers: dict[str, str], added: list[tuple[str, str]] = ()
) -> nbformat.NotebookNode:
    """The release notebook with the stub of each named answer cell replaced, and the
    student's own cells (after_grade_id, source) inserted."""
    nb = nbformat.from_dict(release_nb)
    for after, source in added:
        at = next(i for i, c in enumerate(nb.cells) if nbgrader_meta(c).get("grade_id") == after)
        nb.cells.insert(at + 1, nbformat.v4.new_code_cell(source))
    for cell in nb.cells:
        gid = nbgrader_meta(cell).get("grade_id")
        if gid in answers:
            m = _STUB.search(cell.source)
            if m is None:
                raise ValueError(f"answer cell {gid} has no stub to replace")
            code = "\n".join(m["indent"] + l if l else l for l in answers[gid].split("\n"))
            cell.source = cell.source[: m.start()] + code + cell.source[m.end() :]
    return nb


@dataclass
class Sample:
    """One student's submission: the reference answers with edits, or no answers at all."""

    student: str
    description: str
    edits: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    blank: bool = False  # submits the release unchanged
    replace: dict[str, str] = field(default_factory=dict)  # whole answers of their own
    added: list[tuple[str, str]] = field(default_factory=list)  # their own cells: (after grade id, code)

    def answers(self, reference: dict[str, str]) -> dict[str, str]:
        if self.blank:
            return {}
        out = dict(reference, **self.replace)
        for gid, pairs in self.edits.items():
            for old, new in pairs:
                if old not in out[gid]:
                    raise ValueError(f"{self.student}: {old!r} is not in the reference {gid}")
                out[gid] = out[gid].replace(old, new)
        return out

    def notebook(self, *, source_nb, release_nb) -> nbformat.NotebookNode:
        return fill(release_nb, self.answers(reference_answers(source_nb)), self.added)


def write_submissions(samples: list[Sample], *, course: Path, submitted: Path | None = None) -> list[Path]:
    """Write each sample as nbgrader expects: submitted/<student>/<assignment>/<notebook>.ipynb."""
    source_nb = nbformat.read(course / "source" / spec.ASSIGNMENT / f"{spec.NOTEBOOK}.ipynb", 4)
    release_nb = nbformat.read(course / "release" / spec.ASSIGNMENT / f"{spec.NOTEBOOK}.ipynb", 4)
    submitted = submitted or course / "submitted"
    paths = []
    for s in samples:
        path = submitted / s.student / spec.ASSIGNMENT / f"{spec.NOTEBOOK}.ipynb"
        path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(s.notebook(source_nb=source_nb, release_nb=release_nb), path)
        paths.append(path)
    return paths
