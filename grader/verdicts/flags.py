"""What the judge lists for the TAs: each sign of cheating with its kind and the grade ids it
bears on (reports/replay/<student>.json "flags"; grader/reports/suspicious.py gathers the class's).

A flag never changes a grade: the replay decides them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from ..exercise import spec
from ..exercise.definition import Gradient
from ..exercise.graded import GradedExercise
from .budget import for_submission
from .scan import Finding, scan_source
from .scan_rules import bound_names

if TYPE_CHECKING:  # grader.reports reads KERNEL and cell_grade_ids without importing torch
    from ..exercise.verdict import Verdict

KERNEL = "kernel"  # a gradient right in the student's kernel and wrong on fresh inputs
KERNEL_EVIDENCE = "matched autograd in the student's kernel but fails on fresh inputs"


@dataclass
class Flag:
    kind: str  # the scan's kinds (scan.py: "autograd", "tampering", "introspection", ...) or KERNEL
    evidence: str
    grade_ids: list[str]

    def reason(self) -> str:
        """The flag in one line, for people (Gradescope's log for staff, say)."""
        return f"{self.kind}: {self.evidence}"

    def to_json(self) -> dict:
        """As the record keeps it: reports/replay/<student>.json's "flags", one object each."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> Flag:
        """A record's flag back (to_json's object); its reason() is the line it had."""
        return cls(str(data["kind"]), str(data["evidence"]), list(data.get("grade_ids") or []))


def cell_grade_ids(cell: str, exercise: GradedExercise = spec.NINJA) -> list[str]:
    """An answer cell bears on its exercise's grades; a cell of the student's own on any of them."""
    ex = next((k for k in exercise.exercises if exercise.answer_cell(k) == cell), None)
    return [g.grade_id for g in exercise.graded if ex is None or g.exercise == ex]


def scan_plan(plan) -> list[Finding]:
    """The student's cells only: the instructor's locked cells are the kit's own code. A name any
    cell binds (`dlogits_backward = ...` in one, read in the next) is not torch's."""
    own = bound_names([c["source"] for c in plan])
    mine = [c for c in plan if c["kind"] in ("answer", "added")]
    budget = for_submission()  # one for all the submission's cells
    return [f for c in mine for f in scan_source(c["label"], c["source"], own, budget)]


def flags(
    findings: list[Finding],
    verdicts: dict[str, Verdict],
    in_kernel: dict[str, float] | None,
    exercise: GradedExercise = spec.NINJA,
) -> list[Flag]:
    out = [Flag(f.kind, f.text(), cell_grade_ids(f.cell, exercise)) for f in findings if f.serious]
    for gid, score in (in_kernel or {}).items():
        v = verdicts.get(gid)
        # a value the replay never got (a deleted cell, say) is not a sign of copying; nor is a
        # training run, which the kernel checks by its own loss falling, not against autograd
        if (
            v
            and isinstance(exercise.by_grade_id.get(gid), Gradient)
            and score >= v.max_score
            and v.score < v.max_score
            and v.problem not in ("missing", "judge_timeout", "autograd")
        ):
            out.append(Flag(KERNEL, f"{gid} {KERNEL_EVIDENCE}", [gid]))
    return out
