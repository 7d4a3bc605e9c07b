"""For TAs: pairs of students whose answer code is too similar, with the evidence (printed by
`python -m grader.course.similarity [COURSE]`). Copying never changes a grade.

Design: AST-normalised k-gram fingerprints with winnowing (Schleimer et al. 2003, as in MOSS),
standard library only. Not copydetect: it maps every name to one token, losing the gradient
names (dW1, dbnraw) the exercise fixes and that locate a match, and it does not see through
reordered independent lines. Per answer cell and added cell: parse (comments, spacing go); keep
the names the exercise gives (the instructor's notebook outside the solution regions, the
gradients, builtins), the student's helpers all become "_"; order each block canonically
(topologically by the data dependencies, independent statements by text); hash k-grams
of the unparsed tokens and winnow. The lecture's solution is MOSS's base file: k-grams of the
instructor's notebook are ignored, as are those many students hold (MOSS's -m). An inverted
index from fingerprint to students compares only students sharing one.
"""

from __future__ import annotations

import ast
import builtins
import copy
import hashlib
import heapq
import json
import re
import sys
import textwrap
from collections import Counter, defaultdict, namedtuple
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

from ..exercise import spec
from ..exercise.cells import nbgrader_meta, strip_magics
from .quote import for_log

K = 10  # tokens per k-gram: about one short gradient line
WINDOW = 4  # winnowing window: every common run of K + WINDOW - 1 tokens leaves a fingerprint
MIN_SHARED = 10  # fewer shared fingerprints (~2 lines) is what two honest variants share by chance
MAX_HOLDERS = 10  # a fingerprint more students hold is common knowledge (MOSS's -m)
THRESHOLD = 0.5  # shared / the smaller student's own fingerprints: a copier of part is seen too
_MAX_SORTED = 400  # statements per block past which the order is kept (the sort is quadratic)
_EVIDENCE_ROWS = 12
_NB = f"{spec.ASSIGNMENT}/{spec.NOTEBOOK}.ipynb"
_ANSWERS = set(spec.ANSWER_CELLS.values())
_TOKEN = re.compile(r"[A-Za-z_]\w*|\d[\w.]*|\S")
_SOLUTION = re.compile(r"^([ \t]*)### BEGIN SOLUTION.*?### END SOLUTION", re.M | re.S)
_COMPOUND = (ast.FunctionDef, ast.ClassDef, ast.For, ast.While, ast.If, ast.With)  # async ones: a leaf
_FLOW = (ast.Return, ast.Raise, ast.Break, ast.Continue, ast.Global, ast.Nonlocal)
_NAMED = {ast.Name: "id", ast.arg: "arg", ast.FunctionDef: "name"}
_BROKEN = (ValueError, TypeError, RecursionError, MemoryError)  # a student's notebook we cannot read


@dataclass
class Finding:
    students: tuple[str, str]
    evidence: str  # the similarity figure, the cells, the matching lines side by side
    grade_ids: list[str]  # the answer cells involved, of either student
    kind: str = "similar"


# label: its grade id or "cell 12 (added)"; line_of: per token, the first line of its statement
_Cell = namedtuple("_Cell", "label lines tokens line_of")


def _rename(tree, fixed: set[str]):
    """The student's own names -> "_", and 1 spelt as 1.0. One placeholder, not v0, v1... by first
    use: a helper inserted by a copier would renumber every later one."""
    for node in ast.walk(tree):
        attr = _NAMED.get(type(node))
        if attr and getattr(node, attr) not in fixed:
            setattr(node, attr, "_")
        elif isinstance(node, ast.Constant) and type(node.value) is int and abs(node.value) < 2**53:
            node.value = float(node.value)
    return tree


def _base_name(node) -> str | None:
    while isinstance(node, (ast.Subscript, ast.Attribute, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _effects(stmt) -> tuple[set, set, bool]:
    """Names a statement reads, names it may change, and whether it steers control flow. The
    order only has to be the same for two copies, so what a copier cannot swap is enough."""
    reads, writes = set(), set()
    for node in ast.walk(stmt):
        if isinstance(node, ast.Name):
            (reads if isinstance(node.ctx, ast.Load) else writes).add(node.id)
        elif isinstance(node, (ast.Subscript, ast.Attribute)) and not isinstance(node.ctx, ast.Load):
            writes.add(_base_name(node))  # dC[ix] += ... changes dC
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", "")[-1:] == "_":
            writes.add(_base_name(node.func))  # torch's in-place methods: x.add_(y) changes x
    if isinstance(stmt, ast.Expr):
        writes |= reads  # a bare call may change whatever it is given
    flow = not isinstance(stmt, _COMPOUND[:2]) and any(isinstance(n, _FLOW) for n in ast.walk(stmt))
    return reads | (writes if isinstance(stmt, ast.AugAssign) else set()), writes, flow


def _canonical(stmts: list, fixed: set[str]) -> list:
    """The block in a canonical order: dependent statements keep theirs, the others by text."""
    stmts = [s for s in stmts if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    for s in (s for s in stmts if isinstance(s, _COMPOUND)):
        s.body, s.orelse = _canonical(s.body, fixed), _canonical(getattr(s, "orelse", []), fixed)
    if len(stmts) > _MAX_SORTED:
        return stmts
    keys = [ast.dump(_rename(copy.deepcopy(s), fixed)) for s in stmts]
    eff, n = [_effects(s) for s in stmts], len(stmts)
    dep = lambda a, b: a[2] or b[2] or a[1] & (b[0] | b[1]) or a[0] & b[1]  # b must stay after a
    after = [[j for j in range(i + 1, n) if dep(eff[i], eff[j])] for i in range(n)]
    waiting = Counter(j for js in after for j in js)
    ready, out = [(keys[i], i) for i in range(n) if not waiting[i]], []
    heapq.heapify(ready)  # Kahn's topological sort, the smallest text first among the ready
    while ready:
        i = heapq.heappop(ready)[1]
        out.append(stmts[i])
        for j in after[i]:
            waiting[j] -= 1
            if not waiting[j]:
                heapq.heappush(ready, (keys[j], j))
    return out


def _emit(stmts: list, tokens: list[str], line_of: list[int]) -> None:
    for s in stmts:
        head = copy.copy(s)
        if isinstance(s, _COMPOUND):  # the header alone, then the blocks
            head.body, head.orelse = [ast.Pass()], []
        found = _TOKEN.findall(ast.unparse(head)) + [";"]
        tokens += found
        line_of += [s.lineno] * len(found)
        if isinstance(s, _COMPOUND):
            _emit(s.body + s.orelse, tokens, line_of)


def _parse(source: str) -> list:
    """The cell's statements; a cell that does not parse as a whole, line by line."""
    stmts = []
    for n, text in enumerate([source] + source.split("\n")):
        try:
            tree = ast.parse(text if n == 0 else text.strip())
        except (SyntaxError, ValueError):  # ValueError: a null byte
            continue
        if n == 0:
            return tree.body
        stmts += ast.increment_lineno(tree, n - 1).body
    return stmts


def _tokens(source: str, fixed: set[str]) -> tuple[list[str], list[int]]:
    tokens, line_of = [], []
    _emit(
        _rename(ast.Module(_canonical(_parse(strip_magics(source)), fixed), []), fixed).body, tokens, line_of
    )
    return tokens, line_of


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


def _given_names(sources: list[str], given: list[str]) -> set[str]:
    """The exercise's names: gradients, instructor's globals, what the lecture's answers read."""
    fixed = set(dir(builtins)) | {spec.EX4_FUNCTION, *spec.EX4_ARGUMENTS}
    fixed |= {g.name for g in spec.GRADIENTS} | {g.target for g in spec.GRADIENTS}
    stored = lambda tree: {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and n.ctx != ast.Load()}
    for stmt in (s for t in given for s in _parse(strip_magics(t))):  # loop variables are anyone's
        if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            fixed |= stored(stmt)
        elif isinstance(stmt, (ast.Import, ast.ImportFrom, ast.FunctionDef)):
            fixed |= {getattr(stmt, "name", None), *(a.asname or a.name for a in getattr(stmt, "names", []))}
    for region in (m.group() for s in sources for m in _SOLUTION.finditer(s)):
        tree = ast.Module(_parse(textwrap.dedent(region)), [])
        fixed |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - stored(tree)
    return fixed


def _reference(course: Path) -> tuple[set[str], set[int]]:
    """The names the exercise gives, and every k-gram of the instructor's notebook (the base)."""
    cells = json.loads((course / "source" / _NB).read_text(encoding="utf-8"))["cells"]
    sources = ["".join(c["source"]) for c in cells if c.get("cell_type") == "code"]
    given = [_SOLUTION.sub(r"\1raise NotImplementedError()", s) for s in sources]  # the release's
    fixed = _given_names(sources, given)
    return fixed, {h for text in sources + given for h in _hashes(_tokens(text, fixed)[0])}


def _student_cells(path: Path, fixed: set[str]) -> list[_Cell]:
    """The answer cells and the cells the student added; ValueError for a broken notebook."""
    try:
        nb = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ValueError(f"unreadable notebook ({type(e).__name__})") from None
    cells, out = nb.get("cells") if isinstance(nb, dict) else None, []
    for i, cell in enumerate(cells if isinstance(cells, list) else [None]):  # no list: "cell 0" is broken
        source = cell.get("source", "") if isinstance(cell, dict) else None
        if isinstance(source, list) and all(isinstance(s, str) for s in source):
            source = "".join(source)
        if not isinstance(source, str):
            raise ValueError(f"cell {i} has no text as its source")
        meta = nbgrader_meta(cell)
        gid = g if isinstance(g := meta.get("grade_id"), str) and g in _ANSWERS else None
        if cell.get("cell_type") == "code" and (gid or not meta):  # not the instructor's cells
            out.append(_Cell(gid or f"cell {i} (added)", source.split("\n"), *_tokens(source, fixed)))
    return out


def _fingerprints(course: Path, fixed: set[str], base: set[int], notes: list[str]):
    """Each student's cells (the submitted copy, else the autograded one), and their fingerprints
    the base does not hold: hash -> (cell, token)."""
    paths = {
        p.parts[-3]: p for stage in ("autograded", "submitted") for p in (course / stage).glob(f"*/{_NB}")
    }
    cells, prints = {}, {}
    for student, path in sorted(paths.items()):
        try:
            cells[student] = _student_cells(path, fixed)
        except _BROKEN as e:  # hostile input costs one student only
            notes.append(f"{student}: skipped, {str(e) or type(e).__name__}")
            continue
        prints[student] = {}
        for c, cell in enumerate(cells[student]):
            for h, pos in _winnow(_hashes(cell.tokens)).items():
                if h not in base:
                    prints[student].setdefault(h, (c, pos))
    return cells, prints


def _evidence(names, cells, prints, shared: set[int], own: tuple[int, int]) -> tuple[str, list[str]]:
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
    return "\n".join(out), sorted(used & _ANSWERS)


def similar_pairs(course: Path, *, threshold: float = THRESHOLD, notes: list | None = None) -> list[Finding]:
    """Pairs sharing at least MIN_SHARED fingerprints the lecture does not explain, and at least
    `threshold` of the smaller one's own; most similar first. A fingerprint held by more than
    MAX_HOLDERS (or 5% of the class) is common knowledge. Students skipped are told in `notes`."""
    cells, prints = _fingerprints(course, *_reference(course), [] if notes is None else notes)
    holders = defaultdict(list)
    for student, fps in prints.items():
        for h in fps:
            holders[h].append(student)
    limit = max(MAX_HOLDERS, len(prints) // 20)
    common = {h for h, who in holders.items() if len(who) > limit}
    shared = Counter(pair for who in holders.values() if len(who) <= limit for pair in combinations(who, 2))
    findings = []
    for (a, b), n in shared.items():
        own = (len(prints[a].keys() - common), len(prints[b].keys() - common))
        if n >= MIN_SHARED and n / min(own) >= threshold:
            both = (prints[a].keys() & prints[b].keys()) - common
            evidence, grade_ids = _evidence((a, b), (cells[a], cells[b]), (prints[a], prints[b]), both, own)
            findings.append((n / min(own), Finding((a, b), evidence, grade_ids)))
    return [f for _, f in sorted(findings, key=lambda x: (-x[0], x[1].students))]


def main(argv: list[str]) -> int:
    notes = []
    findings = similar_pairs(Path(argv[0] if argv else ".").resolve(), notes=notes)
    print("\n".join(f"note: {for_log(note)}" for note in notes) or "no student skipped")
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
