"""run_autograder's work: pick the submitted notebook, find the student in Gradescope's
submission_metadata.json, grade with the kit's nbgrader pipeline (course.py) and write
results/results.json, whatever happens (a run that ends without it shows students an error).

Everything is under AUTOGRADER_ROOT (/autograder on Gradescope): source/ (the zip),
submission/, results/, submission_metadata.json. Anything printed goes to
results/stdout, which only instructors see. Where the sandbox cannot start, the submission
is not graded unless the zip allows it (sandboxing.py).
"""

from __future__ import annotations

import json
import re
import shutil
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from ..verdicts.flags import Flag
from . import course as course_mod
from . import results, sandboxing

DEFAULT_ROOT = Path("/autograder")
ANONYMOUS = "anonymous"


@dataclass
class Layout:
    """Gradescope's folders (https://gradescope-autograders.readthedocs.io/en/latest/specs/)."""

    root: Path

    @property
    def source(self) -> Path:
        return self.root / "source"

    @property
    def submission(self) -> Path:
        return self.root / "submission"

    @property
    def results_json(self) -> Path:
        return self.root / "results" / "results.json"

    @property
    def metadata(self) -> Path:
        return self.root / "submission_metadata.json"

    @property
    def template(self) -> Path:
        return self.source / "course"

    @property
    def work(self) -> Path:
        return self.root / "grading"  # thrown away with the container; kept for a look meanwhile

    def settings(self) -> dict:
        return course_mod.read_settings(self.source)


def student_id(metadata: Path) -> tuple[str, str | None]:
    """The submitter's Gradescope user id (a group's lowest, so every member's resubmission
    gets the same inputs), and a note when there is none."""
    try:
        users = json.loads(metadata.read_text()).get("users") or []
        ids = [str(u["id"]) for u in users if isinstance(u, dict) and u.get("id") is not None]
    except (OSError, ValueError, AttributeError):
        ids = []
    # a folder name for nbgrader: Gradescope's ids are numbers; anything else is cleaned
    ids = [re.sub(r"[^A-Za-z0-9_-]", "_", i) for i in ids if i]
    ids.sort(key=lambda i: (len(i), i))  # numerically, for ids that are numbers
    if not ids:
        return ANONYMOUS, f"no user in {metadata.name}: graded as {ANONYMOUS!r}"
    return ids[0], None


def find_notebook(submission: Path, notebook: str) -> tuple[Path | None, str | None]:
    """NOTEBOOK.ipynb (the assignment's) if submitted, at the top first, else the only notebook;
    else why not."""
    wanted = f"{notebook}.ipynb"
    found = sorted(
        (
            p
            for p in submission.rglob("*.ipynb")
            if p.is_file() and not p.is_symlink() and ".ipynb_checkpoints" not in p.parts
        ),
        key=lambda p: (len(p.parts), str(p)),
    )
    named = [p for p in found if p.name == wanted]
    if named:
        return named[0], None
    if len(found) == 1:
        return found[0], None
    if not found:
        return None, f"no notebook (.ipynb) was submitted; expected {wanted}"
    names = ", ".join(str(p.relative_to(submission)) for p in found)
    return None, f"{len(found)} notebooks were submitted ({names}) and none is named {wanted}: submit one"


def grade(layout: Layout, *, started: float) -> results.Results:
    settings = layout.settings()
    exercise = course_mod.zip_exercise(layout.template, settings)
    notebook, why = find_notebook(layout.submission, exercise.notebook)
    if notebook is None:
        return results.not_graded(why, execution_time=time.monotonic() - started)
    unsandboxed, refusal = sandboxing.decide(settings)
    if refusal:
        print(f"NOT GRADED: the sandbox could not start ({refusal})", flush=True)
        return results.refused(refusal, execution_time=time.monotonic() - started)
    student, note = student_id(layout.metadata)
    print(f"student {student}, notebook {notebook.relative_to(layout.submission)}", flush=True)
    shutil.rmtree(layout.work, ignore_errors=True)
    left_open = _before_unsandboxed(layout, unsandboxed) if unsandboxed else []
    try:
        done = course_mod.autograde(
            template=layout.template,
            work=layout.work,
            student=student,
            notebook=notebook,
            exercise=exercise,
            allow_unsandboxed=bool(unsandboxed),
        )
    except course_mod.SandboxRefused as e:  # it failed in nbgrader, not here: the same refusal
        print(f"NOT GRADED: the sandbox could not start ({e.reason})", flush=True)
        return results.refused(e.reason, execution_time=time.monotonic() - started)
    notes = list(done.notes)
    if notebook.name != f"{exercise.notebook}.ipynb":
        notes.append(f"your notebook {notebook.name} was graded as {exercise.notebook}.ipynb")
    _log(done.record, note)
    out = results.graded(
        scores=done.scores,
        record=done.record,
        notes=notes,
        exercise=exercise,
        visibility=settings.get("visibility", "visible"),
        execution_time=time.monotonic() - started,
    )
    return results.unsandboxed(out, unsandboxed, left_open) if unsandboxed else out


def _before_unsandboxed(layout: Layout, reason: str) -> list[str]:
    """Allowed at build time: said loudly, and what holds solutions or grades closed first."""
    left_open = sandboxing.lock_down(source=layout.source, work=layout.work)
    banner = "!" * 78
    print(f"{banner}\nWARNING: grading WITHOUT the sandbox (the zip was built with --allow-unsandboxed)")
    print(f"WARNING: why it cannot start: {reason}")
    for line in left_open:
        print(f"WARNING: {line}")
    print(banner, flush=True)
    return left_open


def _log(record: dict, note: str | None) -> None:
    """For the instructor (results/stdout): what students are not shown."""
    print(f"seed {record.get('seed')}, replay {record.get('replay_seconds')} s", flush=True)
    for line in ([note] if note else []) + record.get("problems", []):
        print(f"problem: {line}")
    for flag in record.get("flags", []):
        print(f"suspicious: {Flag.from_json(flag).reason()}")


def run(*, root: Path) -> results.Results:
    """Grade the submission under `root` and write results.json; never raises for a submission."""
    layout, started = Layout(root), time.monotonic()
    try:
        out = grade(layout, started=started)
    except Exception:
        traceback.print_exc()  # to results/stdout, for the instructor
        out = results.not_graded(
            "the autograder failed on this submission; the course staff can see why in its log",
            execution_time=time.monotonic() - started,
        )
    results.write(out, layout.results_json)
    print(f"score {out.to_json()['score']:g} in {out.execution_time} s", flush=True)
    return out
