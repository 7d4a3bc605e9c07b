"""A graded cell's row in the table a student reads first (the feedback page, and
`backprop-ninja check`): the points, and "right", the carried-credit note or the one-line hint.
Standard library and the kit's spec only: the student's own check imports no nbgrader."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..exercise import spec
from ..exercise.cells import CONTINUED, nbgrader_meta
from ..settings import MAX_HINT


@dataclass
class Row:
    grade_id: str
    name: str  # the gradient, e.g. "dlogprobs" ("training" for exercise 4's run)
    exercise: int
    score: float | None  # None: no grade for this cell
    max_score: float
    verdict: str  # "right", the hint, or the carried-credit note
    linked: bool  # the cell is in the notebook, so its anchor is on the page
    carried: bool = False  # credit for a right rule that received a wrong input

    @property
    def kind(self) -> str:
        """The row's Bootstrap class (nbgrader's feedback page loads Bootstrap)."""
        if self.score is None or self.score < self.max_score:
            return "danger" if not self.score else "warning"
        return "info" if self.carried else "success"


def row(g: spec.Gradient, cell, recorded) -> Row:
    """The gradebook's score (GetGrades put it in the cell), else the replay's."""
    verdict = recorded if isinstance(recorded, dict) else _from_outputs(cell)
    score = nbgrader_meta(cell).get("score") if cell is not None else None
    if score is None and verdict.get("score") is not None:
        score = float(verdict["score"])
    text = _verdict_text(score, g.points, verdict)
    return Row(
        g.grade_id, g.name, g.exercise, score, g.points, text, cell is not None, bool(verdict.get("carried"))
    )


def _from_outputs(cell) -> dict:
    """The verdict as ReplayGrades printed it in the cell (the replay record is missing)."""
    if cell is None:
        return {}
    text = "".join(
        "".join(o.get("text", "")) for o in cell.get("outputs", []) if o.get("output_type") == "stream"
    )
    lines: list[str] = []
    for l in text.splitlines()[1:]:
        if l.startswith(CONTINUED) and lines:  # a line Verdict.text() wrapped
            lines[-1] += " " + l.strip()
        elif l.strip():
            lines.append(l.strip())
    hint = next((l[len("hint:") :].strip() for l in lines if l.startswith("hint:")), None)
    return {"lines": lines, "hint": hint, "carried": any("carried error" in l for l in lines)}


def _verdict_text(score, max_score: float, verdict: dict) -> str:
    lines = [str(l) for l in verdict.get("lines") or []]
    if verdict.get("carried"):
        text = next((l for l in lines if "carried error" in l), "credit for a carried error")
    elif score is not None and score >= max_score:
        text = "right"
    elif verdict.get("hint"):
        text = str(verdict["hint"])
    elif lines:  # the comparison's own line, without the "name | " column
        text = re.sub(r"^\S+\s*\|\s*", "", lines[-1])
    else:
        text = "not graded" if score is None else "wrong"
    recorded = verdict.get("score")
    if recorded is not None and score is not None and float(recorded) != float(score):
        text += f" (score set by a grader; the autograder gave {float(recorded):g})"
    text = " ".join(text.split())
    return text if len(text) <= MAX_HINT else text[: MAX_HINT - 1] + "\u2026"
