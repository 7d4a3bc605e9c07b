"""Gradescope's results.json: one test per graded cell, from the gradebook's scores and the
judge's record (the exercise's records: reports/replay/<student>.json for Backprop Ninja), in
the order of the exercise's graded cells.

Format: https://gradescope-autograders.readthedocs.io/en/latest/specs/ (top-level score,
execution_time, output, tests[] of name, score, max_score, output, visibility, status).
The top-level output and "visible" tests are the student's; "hidden" tests, stdout and
extra_data are for staff only: what only staff may read (the seed, a sandbox's failure)
goes there.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..exercise import spec
from ..exercise.graded import GradedExercise

VISIBILITIES = ("visible", "hidden", "after_due_date", "after_published")


@dataclass
class Test:
    name: str
    score: float
    max_score: float
    output: str
    visibility: str = "visible"
    status: str | None = None  # "passed" / "failed": the colour, where the score does not say it

    def to_json(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass
class Results:
    output: str
    tests: list[Test] = field(default_factory=list)
    execution_time: int = 0
    # stored by Gradescope, not shown to students: the TA's side (seed, problems, cheat signs)
    extra_data: dict = field(default_factory=dict)
    score: float | None = None  # None: the sum of the tests'

    def to_json(self) -> dict:
        total = sum(t.score for t in self.tests) if self.score is None else self.score
        return {
            "score": float(total),
            "execution_time": int(self.execution_time),
            "output": self.output,
            "stdout_visibility": "hidden",  # the grader's log names the seed and sandbox details
            "tests": [t.to_json() for t in self.tests],
            "extra_data": self.extra_data,
        }


def verdict_output(grade_id: str, score: float, points: float, verdict: dict | None) -> str:
    """What the kit's feedback shows for a cell: PASS/FAIL, the judge's lines, the hint."""
    if verdict is None:
        return f"{grade_id}: {score:g}/{points:g} points (no verdict was recorded for this cell)"
    mark = "PASS" if score == points else "FAIL"
    lines = [f"{mark} {grade_id}: {score:g}/{points:g} points"]
    lines += [f"  {line}" for line in verdict.get("lines") or []]
    hint = verdict.get("hint")
    if hint and not any(hint in line for line in lines):  # most verdicts already carry it as a line
        lines.append(f"  hint: {hint}")
    return "\n".join(lines)


def title(exercise: GradedExercise) -> str:
    """The summary's name of the exercise: its definition's title (Backprop Ninja's has none)."""
    return exercise.definition.title or ("Backprop Ninja" if exercise is spec.NINJA else exercise.assignment)


def graded(
    *,
    scores: dict[str, float],
    record: dict,
    notes: list[str],
    exercise: GradedExercise,
    visibility: str = "visible",
    execution_time: float = 0.0,
) -> Results:
    """Results of a graded submission of `exercise`: `scores` are the gradebook's, by grade id."""
    verdicts = record.get("verdicts", {})
    tests = []
    for g in exercise.graded:
        score = float(scores.get(g.grade_id, 0.0))
        output = verdict_output(g.grade_id, score, g.points, verdicts.get(g.grade_id))
        tests.append(Test(g.grade_id, score, float(g.points), output, visibility))
    total = sum(t.score for t in tests)
    summary = [f"{title(exercise)}: {total:g}/{exercise.total_points():g} points"]
    # the exercises it has: a written one has no training check, often no exercise 4
    summary += [
        f"exercise {ex}: {sum(t.score for t in tests if exercise.by_grade_id[t.name].exercise == ex):g}"
        f"/{exercise.exercise_points(ex):g}"
        for ex in exercise.exercises
    ]
    summary += [f"Note: {n}" for n in notes]
    # the flags: each sign with its kind and grade ids (grader/verdicts/flags.py), for staff
    extra = {k: record.get(k) for k in ("student", "seed", "problems", "flags")}
    return Results(
        output="\n".join(summary), tests=tests, execution_time=round(execution_time), extra_data=extra
    )


STUDENT_REFUSAL = (
    "Your notebook could not be graded automatically; your instructor has been told. "
    "You do not need to submit again: it will be graded once the autograder is fixed."
)


def staff_test(name: str, output: str) -> Test:
    """A line only staff see, as a test of no points (Gradescope shows hidden tests to them)."""
    return Test(name=name, score=0.0, max_score=0.0, output=output, visibility="hidden", status="failed")


def refused(reason: str, *, execution_time: float = 0.0) -> Results:
    """Not graded because the sandbox could not start: the student gets a plain word, staff the
    reason (a hidden test and extra_data); zero points, which a regrade replaces."""
    why = f"not graded: the sandbox could not start ({reason})"
    student = Test("Not graded", 0.0, 0.0, STUDENT_REFUSAL, visibility="visible", status="failed")
    staff = staff_test(
        why,
        f"{why}.\nStudent code never runs without the sandbox unless the zip is built with "
        "`backprop-ninja gradescope build --allow-unsandboxed`. Fix the image, then regrade.",
    )
    return Results(
        output=STUDENT_REFUSAL,
        tests=[student, staff],
        score=0.0,
        execution_time=round(execution_time),
        extra_data={"not_graded": why, "sandbox": reason},
    )


def unsandboxed(results: Results, reason: str, notes: list[str]) -> Results:
    """A submission graded without the sandbox (staff opted in at build time): said loudly,
    to staff only."""
    why = f"graded WITHOUT the sandbox (built with --allow-unsandboxed): {reason}"
    results.tests.append(staff_test("WARNING: graded without the sandbox", "\n".join([why, *notes])))
    results.extra_data["sandbox"] = why
    return results


def not_graded(reason: str, *, execution_time: float = 0.0) -> Results:
    """Zero points, and the reason as the submission's output."""
    return Results(output=f"Not graded: {reason}", score=0.0, execution_time=round(execution_time))


def write(results: Results, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results.to_json(), indent=1))
