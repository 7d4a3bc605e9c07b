"""For TAs: pairs of students whose answer code is too similar, with the evidence (printed by
`python -m grader.reports.similarity [COURSE]`). Copying never changes a grade.

Design: AST-normalised k-gram fingerprints with winnowing (Schleimer et al. 2003, as in MOSS),
standard library only. Not copydetect: it maps every name to one token, losing the gradient
names (dW1, dbnraw) the exercise fixes and that locate a match, and it does not see through
reordered independent lines. Per answer cell and added cell: parse (comments, spacing go); keep
the names the exercise gives (the instructor's notebook outside the solution regions, the
gradients, builtins), the student's helpers all become "_"; order each block canonically
(topologically by the data dependencies, independent statements by text); hash k-grams
of the unparsed tokens and winnow (canonical.py). The lecture's solution is MOSS's base file:
k-grams of the instructor's notebook are ignored, as are those many students hold (MOSS's -m).
An inverted index from fingerprint to students compares only students sharing one.

Bounded (verdicts/budget.py, limits in grader/settings.py): a cell, or a submission, over its
size or work or time is not compared, and listed (kind "too_large"); past the class's deadline
(the batch's: a share of its grading time) the students not compared are listed ("not_compared").
"""

from __future__ import annotations

import ast
import builtins
import hashlib
import json
import re
import sys
import textwrap
from collections import Counter, defaultdict, namedtuple
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path

from ..exercise import spec
from ..exercise.cells import nbgrader_meta, strip_magics
from ..exercise.graded import GradedExercise
from ..quote import for_log
from ..settings import NOTEBOOK_BYTES
from ..verdicts.budget import NOT_COMPARED, TOO_LARGE, Budget, OverBudget, for_cell, for_class, for_submission
from .canonical import statements, tokens

K = 10  # tokens per k-gram: about one short gradient line
WINDOW = 4  # winnowing window: every common run of K + WINDOW - 1 tokens leaves a fingerprint
MIN_SHARED = 10  # fewer shared fingerprints (~2 lines) is what two honest variants share by chance
MAX_HOLDERS = 10  # a fingerprint more students hold is common knowledge (MOSS's -m)
THRESHOLD = 0.5  # shared / the smaller student's own fingerprints: a copier of part is seen too
_EVIDENCE_ROWS = 12
_SOLUTION = re.compile(r"^([ \t]*)### BEGIN SOLUTION.*?### END SOLUTION", re.M | re.S)
_BROKEN = (ValueError, TypeError, RecursionError, MemoryError)  # a student's notebook we cannot read


@dataclass
class Finding:
    students: tuple[str, str]
    evidence: str  # the similarity figure, the cells, the matching lines side by side
    grade_ids: list[str]  # the answer cells involved, of either student
    kind: str = "similar"


@dataclass
class Skipped:
    """What was not compared, and why: a sign in the TAs' list (suspicious.py)."""

    student: str
    kind: str  # "unreadable", TOO_LARGE or NOT_COMPARED
    evidence: str
    grade_ids: list[str] = field(default_factory=list)  # the answer cells not compared

    def __str__(self) -> str:
        return f"{self.student}: {self.evidence}"


# label: its grade id or "cell 12 (added)"; line_of: per token, the first line of its statement;
# prints: its winnowed fingerprints, hash -> token
_Cell = namedtuple("_Cell", "label lines tokens line_of prints")


def _hashes(tokens: list[str]) -> list[int]:
    digest = lambda text: hashlib.blake2b(text.encode(), digest_size=8).digest()  # unsalted: stable
    return [int.from_bytes(digest("\0".join(tokens[i : i + K])), "big") for i in range(len(tokens) - K + 1)]


def _winnow(hashes: list[int]) -> dict[int, int]:
    """hash -> its first position, for the rightmost minimum of each window (Schleimer et al.)."""
    picked = {}
    for start in range(max(0, len(hashes) - WINDOW) + 1):
        if window := hashes[start : start + WINDOW]:
            low = min(window)
            picked.setdefault(low, start + max(i for i, h in enumerate(window) if h == low))
    return picked


def _notebook(exercise: GradedExercise) -> str:
    return f"{exercise.assignment}/{exercise.notebook}.ipynb"


def _answers(exercise: GradedExercise) -> set[str]:
    return {exercise.answer_cell(ex) for ex in exercise.exercises}


def _given_names(sources: list[str], given: list[str], exercise: GradedExercise) -> set[str]:
    """The exercise's names: gradients, instructor's globals, what the lecture's answers read."""
    fixed = set(dir(builtins)) | {spec.EX4_FUNCTION, *exercise.training_arguments}
    fixed |= {g.name for g in exercise.gradients} | {g.target for g in exercise.gradients}
    stored = lambda tree: {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and n.ctx != ast.Load()}
    for stmt in (s for t in given for s in statements(strip_magics(t))):  # loop variables are anyone's
        if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            fixed |= stored(stmt)
        elif isinstance(stmt, (ast.Import, ast.ImportFrom, ast.FunctionDef)):
            fixed |= {getattr(stmt, "name", None), *(a.asname or a.name for a in getattr(stmt, "names", []))}
    for region in (m.group() for s in sources for m in _SOLUTION.finditer(s)):
        tree = ast.Module(statements(textwrap.dedent(region)), [])
        fixed |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - stored(tree)
    return fixed


def _reference(course: Path, exercise: GradedExercise) -> tuple[set[str], set[int]]:
    """The names the exercise gives, and every k-gram of the instructor's notebook (the base)."""
    cells = json.loads((course / "source" / _notebook(exercise)).read_text(encoding="utf-8"))["cells"]
    sources = ["".join(c["source"]) for c in cells if c.get("cell_type") == "code"]
    given = [_SOLUTION.sub(r"\1raise NotImplementedError()", s) for s in sources]  # the release's
    fixed = _given_names(sources, given, exercise)
    # most cells hold no solution: their released text is the same, and is tokenised once
    return fixed, {h for text in set(sources + given) for h in _hashes(tokens(text, fixed)[0])}


def _sources(path: Path, answers: set[str]):
    """(label, source) of the answer cells and the cells the student added; ValueError for a
    broken notebook, OverBudget for one larger than preflight reads."""
    try:
        if (size := path.stat().st_size) > NOTEBOOK_BYTES:
            raise OverBudget("submission", f"the notebook is {size >> 20} MB, over {NOTEBOOK_BYTES >> 20} MB")
        nb = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ValueError(f"unreadable notebook ({type(e).__name__})") from None
    cells = nb.get("cells") if isinstance(nb, dict) else None
    for i, cell in enumerate(cells if isinstance(cells, list) else [None]):  # no list: "cell 0" is broken
        source = cell.get("source", "") if isinstance(cell, dict) else None
        if isinstance(source, list) and all(isinstance(s, str) for s in source):
            source = "".join(source)
        if not isinstance(source, str):
            raise ValueError(f"cell {i} has no text as its source")
        meta = nbgrader_meta(cell)
        gid = g if isinstance(g := meta.get("grade_id"), str) and g in answers else None
        if cell.get("cell_type") == "code" and (gid or not meta):  # not the instructor's cells
            yield gid or f"cell {i} (added)", source


def _cell(label: str, source: str, fixed: set[str], budget: Budget) -> _Cell:
    budget.take(len(source))
    found, line_of = tokens(source, fixed, budget)
    prints = _winnow(_hashes(found))
    budget.spend(len(found))  # the hashing, and a look at the clock
    return _Cell(label, source.split("\n"), found, line_of, prints)


def _student_cells(
    student: str, path: Path, fixed: set[str], budget: Budget, notes: list, answers: set[str]
) -> list[_Cell]:
    """Each cell within its own budget and the submission's; a cell over its own is not compared,
    nor any past the submission's (listed in `notes`). ValueError for a broken notebook."""
    out, over, left = [], None, []
    for label, source in _sources(path, answers):
        if over:
            left.append(label)
            continue
        try:
            out.append(_cell(label, source, fixed, for_cell(budget)))
        except (OverBudget, RecursionError, MemoryError) as e:
            level, reason = getattr(e, "level", "cell"), str(e) if isinstance(e, OverBudget) else ""
            if level == "class":
                raise
            reason = f"too large to compare ({reason or 'nested too deeply'})"
            if level == "cell":
                notes.append(Skipped(student, TOO_LARGE, f"{label}: {reason}", sorted({label} & answers)))
            else:
                over, left = reason, [label]
    if over:
        named = ", ".join(left[:5]) + (f" and {len(left) - 5} more" if len(left) > 5 else "")
        notes.append(Skipped(student, TOO_LARGE, f"{named}: {over}", sorted(set(left) & answers)))
    return out


def _fingerprints(course: Path, exercise: GradedExercise, ref: tuple, notes: list, budget: Budget):
    """Each student's cells (the submitted copy, else the autograded one), and their fingerprints
    the base does not hold: hash -> (cell, token). Past the class's deadline: not compared."""
    (fixed, base), answers, nb = ref, _answers(exercise), _notebook(exercise)
    paths = {
        p.parts[-3]: p for stage in ("autograded", "submitted") for p in (course / stage).glob(f"*/{nb}")
    }
    cells, prints, students = {}, {}, sorted(paths.items())
    for n, (student, path) in enumerate(students):
        try:
            cells[student] = _student_cells(student, path, fixed, for_submission(budget), notes, answers)
        except OverBudget as e:
            if e.level == "class":
                notes += _not_compared([s for s, _ in students[n:]], budget)
                break
            notes.append(Skipped(student, TOO_LARGE, f"skipped, too large to compare ({e})"))
            continue
        except _BROKEN as e:  # hostile input costs one student only
            notes.append(Skipped(student, "unreadable", f"skipped, {str(e) or type(e).__name__}"))
            continue
        prints[student] = {}
        for c, cell in enumerate(cells[student]):
            for h, pos in cell.prints.items():
                if h not in base:
                    prints[student].setdefault(h, (c, pos))
    return cells, prints


def _not_compared(students: list[str], budget: Budget, what: str = "") -> list[Skipped]:
    why = f"not compared{what}: the similarity check's {budget.seconds:g} s were over"
    return [Skipped(s, NOT_COMPARED, why) for s in students]


def _shared(prints: dict, notes: list, budget: Budget) -> tuple[Counter, set[int]]:
    """Fingerprints in common, by pair; and those too many hold (common knowledge)."""
    holders = defaultdict(list)
    for student, fps in prints.items():
        for h in fps:
            holders[h].append(student)
    limit = max(MAX_HOLDERS, len(prints) // 20)
    common, shared = {h for h, who in holders.items() if len(who) > limit}, Counter()
    try:
        for who in (who for who in holders.values() if len(who) <= limit):
            budget.spend(len(who))
            shared.update(combinations(who, 2))
    except OverBudget:  # the pairs counted so far are found, with fewer fingerprints: none is false
        notes += _not_compared(sorted(prints), budget, " with every classmate")
    return shared, common


def _evidence(names, cells, prints, shared: set[int], own: tuple[int, int], answers) -> tuple[str, list[str]]:
    rows, cell_pairs = set(), Counter()
    for h in shared:
        (ca, pa), (cb, pb) = prints[0][h], prints[1][h]
        cell_pairs[cells[0][ca].label, cells[1][cb].label] += 1
        for t in range(K):  # token t of the k-gram in one cell is token t in the other
            rows.add((ca, cells[0][ca].line_of[pa + t], cb, cells[1][cb].line_of[pb + t]))
    a, b = (for_log(n, 60) for n in names)
    out = [
        f"similarity {len(shared) / min(own):.0%}: {len(shared)} fingerprints in common that the lecture's "
        f"solution does not explain ({own[0]} in {a}'s answers, {own[1]} in {b}'s)",
        "cells: " + "; ".join(f"{a} {x} ~ {b} {y} ({n})" for (x, y), n in cell_pairs.most_common()),
        f"matching lines ({a} | {b}):",
    ]
    quote = lambda cell, line: f"{cell.label}:{line}  {for_log(cell.lines[line - 1].strip(), 60)}"
    for ca, la, cb, lb in sorted(rows)[:_EVIDENCE_ROWS]:
        out.append(f"  {quote(cells[0][ca], la):<80} | {quote(cells[1][cb], lb)}")
    out += [f"  ... {len(rows) - _EVIDENCE_ROWS} more"] * (len(rows) > _EVIDENCE_ROWS)
    used = {cells[0][ca].label for ca, *_ in rows} | {cells[1][cb].label for _, _, cb, _ in rows}
    return "\n".join(out), sorted(used & answers)


def similar_pairs(
    course: Path,
    *,
    threshold: float = THRESHOLD,
    notes: list | None = None,
    seconds: float | None = None,
    exercise: GradedExercise = spec.NINJA,
) -> list[Finding]:
    """Pairs sharing at least MIN_SHARED fingerprints the lecture does not explain, and at least
    `threshold` of the smaller one's own; most similar first. A fingerprint held by more than
    MAX_HOLDERS (or 5% of the class) is common knowledge. What was not compared (Skipped) is
    told in `notes`; `seconds`: the class's deadline (None: none, each submission is bounded)."""
    notes, budget = [] if notes is None else notes, for_class(seconds)
    cells, prints = _fingerprints(course, exercise, _reference(course, exercise), notes, budget)
    shared, common = _shared(prints, notes, budget)
    findings = []
    for (a, b), n in shared.items():
        own = (len(prints[a].keys() - common), len(prints[b].keys() - common))
        if n >= MIN_SHARED and n / min(own) >= threshold:
            both = (prints[a].keys() & prints[b].keys()) - common
            pair = ((a, b), (cells[a], cells[b]), (prints[a], prints[b]))
            evidence, grade_ids = _evidence(*pair, both, own, _answers(exercise))
            findings.append((n / min(own), Finding((a, b), evidence, grade_ids)))
    return [f for _, f in sorted(findings, key=lambda x: (-x[0], x[1].students))]


def main(argv: list[str]) -> int:
    notes = []
    findings = similar_pairs(Path(argv[0] if argv else ".").resolve(), notes=notes)
    print("\n".join(f"note: {for_log(str(note))}" for note in notes) or "no student skipped")
    for student in sorted({s for f in findings for s in f.students}):
        found = [f for f in findings if student in f.students]
        print(f"{for_log(student)}: similar to {len(found)} other(s) (grades unchanged)")
        for f in found:
            print(f"  ~ {for_log(f.students[f.students[0] == student])} [{', '.join(f.grade_ids)}]")
            print("      " + f.evidence.replace("\n", "\n      "))
    print(f"{len(findings)} similar pair(s): for a TA to look at, grades follow the replay either way")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
