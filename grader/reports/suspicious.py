"""For TAs: one list of the class's signs of cheating, from the replay records (and the pairs of
similar submissions of grader/reports/similarity.py, once that module exists).

`backprop-ninja suspicious [COURSE]` prints them grouped by student and writes
COURSE/reports/suspicious.json, a JSON list with one entry per sign:
    {"students": ["bob"], "kind": "autograd", "evidence": "ex1_solution, line 3: reads .grad: ...",
     "grade_ids": ["ex1_dlogprobs", ...]}
A student with nothing to report is in no entry. Grades follow the replay either way: this is a
list to look at, not a verdict. What similarity did not compare is an entry too: "too_large" (a
cell or submission over its budget), "not_compared" (the class's deadline came first),
"unreadable"; the batch gives similarity a deadline, a share of its grading time.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from ..exercise import spec
from ..exercise.graded import GradedExercise
from ..quote import for_log
from ..settings import report_dir
from ..verdicts.flags import KERNEL

SHOWN = 8  # entries printed per student; the file has all of them


@dataclass
class Entry:
    students: list[str]  # one, or two for a similar pair
    kind: str  # "autograd", "tampering", "introspection", "file", "dynamic", "kernel", "similar", ...
    evidence: str
    grade_ids: list[str]  # the grades it bears on; [] when unknown

    def to_json(self) -> dict:
        return asdict(self)


def read_records(course: Path, folder: Path | None = None) -> dict[str, dict]:
    """reports/replay/<student>.json by student (or another exercise's records `folder`); a
    half-written record is skipped."""
    out = {}
    for path in sorted((folder or report_dir(course) / "replay").glob("*.json")):
        try:
            record = json.loads(path.read_text())
            out[str(record["student"])] = record
        except (ValueError, KeyError, TypeError):
            continue
    return out


def collect_findings(
    course: Path,
    *,
    records: dict[str, dict] | None = None,
    seconds: float | None = None,
    exercise: GradedExercise = spec.NINJA,
) -> list[Entry]:
    """Every sign in the class, student by student, then the similar pairs (and what was not
    compared); `seconds`: similarity's deadline for the class (None: each submission's own only)."""
    records = read_records(course, exercise.records(report_dir(course))) if records is None else records
    return record_signs(records) + _similar(course, seconds, exercise)


def record_signs(records: dict[str, dict]) -> list[Entry]:
    """The signs the judge recorded, student by student (any exercise's records)."""
    return [e for student, record in records.items() for e in _entries(student, record)]


def _entries(student: str, record: dict) -> list[Entry]:
    flags = record.get("flags") or []
    kernel = [f for f in flags if f["kind"] == KERNEL]
    if len(kernel) < 2:
        kernel = []
    out = [Entry([student], f["kind"], f["evidence"], list(f["grade_ids"])) for f in flags if f not in kernel]
    if kernel:  # one entry: 24 lines of the same sign tell a TA nothing more
        gids = [gid for f in kernel for gid in f["grade_ids"]]
        evidence = f"{len(gids)} values matched autograd in the student's kernel but fail on fresh inputs"
        out.append(Entry([student], KERNEL, evidence, gids))
    return out


def _similar(
    course: Path, seconds: float | None = None, exercise: GradedExercise = spec.NINJA
) -> list[Entry]:
    """Pairs of near-identical submissions, from grader/reports/similarity.py if it is there, and
    the students or cells it did not compare."""
    try:
        from .similarity import similar_pairs  # lazily: written separately, may be absent
    except ModuleNotFoundError as e:
        if e.name != f"{__package__}.similarity":
            raise
        return []  # HOOK (issue 11, section 5): similarity.py's pairs join the list here
    notes = []
    try:
        pairs = similar_pairs(course, notes=notes, seconds=seconds, exercise=exercise)
    except (OSError, ValueError) as e:  # no instructor's notebook to compare against, say
        print(f"note: similar pairs not computed: {for_log(e)}", file=sys.stderr)
        return []
    out = [Entry(list(f.students), f.kind, f.evidence, list(f.grade_ids)) for f in pairs]
    return out + [Entry([n.student], n.kind, n.evidence, list(n.grade_ids)) for n in notes]


def by_student(entries: list[Entry]) -> dict[str, list[Entry]]:
    """Each student's entries, in the list's order; a pair is under both of its students."""
    out: dict[str, list[Entry]] = {}
    for entry in entries:
        for student in entry.students:
            out.setdefault(student, []).append(entry)
    return out


def collect(course: Path) -> dict[str, dict]:
    """The former per-student view ({student: score, max_score, reasons, findings}), kept for
    TAs' scripts; the kit itself reads collect_findings."""
    records = read_records(course)
    out = {}
    for student, entries in by_student(collect_findings(course, records=records)).items():
        record = records.get(student, {})
        out[student] = {k: record.get(k) for k in ("score", "max_score")} | {
            "reasons": [f"{e.kind}: {e.evidence}" for e in entries],
            "findings": record.get("findings", []),
        }
    return out


def write(course: Path, entries: list[Entry], exercise: GradedExercise = spec.NINJA) -> Path:
    out = report_dir(course) / f"suspicious{exercise.suffix}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps([e.to_json() for e in entries], indent=1))
    return out


def grade_ids_text(grade_ids: list[str], exercise: GradedExercise = spec.NINJA) -> str:
    """`ex1` for all of exercise 1's grade ids, `24 of ex1's 26` for most of them, else the ids."""
    parts = []
    for ex in exercise.exercises:
        whole = [g.grade_id for g in exercise.graded if g.exercise == ex]
        mine = [gid for gid in grade_ids if gid in whole]
        if len(whole) > 1 and len(mine) == len(whole):
            parts.append(f"ex{ex}")
        elif len(mine) > 3:
            parts.append(f"{len(mine)} of ex{ex}'s {len(whole)}")
        else:
            parts += mine
    known = {g.grade_id for g in exercise.graded}
    return ", ".join(parts + [gid for gid in grade_ids if gid not in known]) or "no grade id"


def _line(e: Entry, student: str) -> str:
    """One entry as printed under `student`: a pair's lines of evidence under its first student."""
    first, *more = e.evidence.split("\n")
    pair = [for_log(s) for s in e.students if s != student]
    also = f" (with {', '.join(pair)})" if pair else ""
    out = f"  - {e.kind}{also} [{grade_ids_text(e.grade_ids)}]: {for_log(first, 300)}"
    if more and student == e.students[0]:
        out += "".join(f"\n      {for_log(line, 300)}" for line in more[:20])
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="backprop-ninja suspicious",
        description="The class's signs of cheating, grouped by student; also COURSE/reports/suspicious.json.",
    )
    ap.add_argument("course", nargs="?", default=".", help="the course folder (default: .)")
    course = Path(ap.parse_args(argv).course).resolve()
    records = read_records(course)
    entries = collect_findings(course, records=records)
    out = write(course, entries)
    if not entries:
        print("no suspicious submissions")
    for student, mine in by_student(entries).items():
        record = records.get(student, {})
        score = f"{record['score']:g}/{record['max_score']:g}" if "score" in record else "no replay record"
        print(f"{for_log(student)}: {score} (grade follows the replay)")
        for e in mine[:SHOWN]:  # evidence quotes the student's code: for_log keeps escape codes out
            print(_line(e, student))
        if len(mine) > SHOWN:
            print(f"  - ... {len(mine) - SHOWN} more in {out}")
    return 0
