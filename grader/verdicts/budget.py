"""The budget of one analysis of a student's text, per cell, per submission and per class.

The static scan (scan.py), similarity (course/similarity.py) and preflight (course/preflight.py)
read text a student chose, and text can be crafted to be slow to analyse: `if 0:` blocks of 400
lines made similarity's canonical order quadratic in the whole cell (issue 17: a 1 MiB cell held
`backprop-ninja suspicious` for 73 s, 3 MiB for 231 s and 2.3 GB). So the text's size is
checked before it is parsed, the work is counted where it is done (a syntax-tree node visited, a
pair of statements ordered), and the deadline is checked at each count, inside the loops:
nothing is interrupted from outside, so nothing can hang and no process is killed. Past a budget
the analysis raises OverBudget; its caller skips that cell, submission or the rest of the class
with a sign of kind "too_large" (or "not_compared"). The limits are in grader/settings.py.
"""

from __future__ import annotations

import ast
import time

from .. import settings

TOO_LARGE = "too_large"  # the sign's kind: a cell or submission over its budget, not analysed
NOT_COMPARED = "not_compared"  # the class's deadline came first


class OverBudget(Exception):
    """`level`: whose budget ran out ("cell", "submission" or "class"), so how much to skip."""

    def __init__(self, level: str, reason: str):
        super().__init__(reason)
        self.level = level


class Budget:
    """Characters, work and seconds one cell, submission or class may take. A budget `within` a
    wider one spends from it too: what is over this one's own limit is refused first (and not
    charged to the wider one), then the wider one's limits and deadline are looked at."""

    def __init__(self, level: str, *, chars=None, work=None, seconds=None, within: Budget | None = None):
        self.level, self.within = level, within
        self.chars, self.work, self.seconds = chars, work, seconds
        self.taken = self.spent = 0
        self.deadline = None if seconds is None else time.monotonic() + seconds

    def take(self, chars: int) -> None:
        """Before reading a text of `chars` characters."""
        if self.chars is not None and self.taken + chars > self.chars:
            have = f"{self.taken + chars:,} characters, over the {self.chars:,}"
            raise OverBudget(self.level, f"{have} a {self.level} may have")
        if self.within:
            self.within.take(chars)
        self.taken += chars

    def spend(self, units: int = 1) -> None:
        """Before (or while) doing `units` of work: count them, and look at the clock."""
        if self.work is not None and self.spent + units > self.work:
            raise OverBudget(self.level, f"over the {self.work:,} units of work a {self.level} may take")
        if self.within:
            self.within.spend(units)
        self.spent += units
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise OverBudget(self.level, f"over the {self.seconds:g} s a {self.level} may take")


def for_cell(within: Budget | None = None) -> Budget:
    """One cell's budget, within its submission's."""
    return _at("cell", within)


def for_submission(within: Budget | None = None) -> Budget:
    """One submission's budget, within the class's when there is one."""
    return _at("submission", within)


def _at(level: str, within: Budget | None) -> Budget:
    """The level's limits, as grader/settings.py names them (ANALYSIS_<LEVEL>_CHARS, ...)."""
    limit = lambda what: getattr(settings, f"ANALYSIS_{level.upper()}_{what}")  # noqa: E731
    return Budget(level, chars=limit("CHARS"), work=limit("WORK"), seconds=limit("SECONDS"), within=within)


def for_class(seconds: float | None) -> Budget:
    """The whole class's: only a deadline (None: none)."""
    return Budget("class", seconds=seconds)


def end_checks_seconds(grading_seconds: float) -> float:
    """The class's deadline for the batch's end-of-run checks: a fixed share of its grading time."""
    return max(settings.END_CHECKS_SECONDS, settings.END_CHECKS_SHARE * grading_seconds)


def walk(node: ast.AST, budget: Budget):
    """ast.walk, each node counted."""
    for child in ast.walk(node):
        budget.spend()
        yield child


def parse(source: str, budget: Budget) -> ast.Module:
    """The syntax tree, each node counted (the caller took the source's size first). SyntaxError
    and ValueError (a null byte) as ast.parse; a tree too deep to build is OverBudget."""
    try:
        tree = ast.parse(source)
    except (RecursionError, MemoryError):
        raise OverBudget(budget.level, "nested too deeply to analyse") from None
    for _ in walk(tree, budget):
        pass
    return tree
