"""Which gradients autograd made, and what that costs: the notebook as submitted, run with
autograd blocked and with it watched (grader/replay/run.py), compared gradient by gradient.

A gradient right with autograd and wrong without it came from autograd. Under the default
policy ("zero") the grades come from the blocked runs, so it already has no credit; here it
gets the verdict that says why, and a flag. Under "flag" the grades come from the watched
runs, as if autograd were allowed, and the same gradients are listed for review. A cell that
calls `loss.backward()` to check an answer changes no gradient: no verdict changes, no flag.
"Autograd" here is any derivative torch computes: the engine, torch.func, forward mode, and
torch's own derivative kernels and helpers (grader/untrusted/derivative_block.py). A blocked run
that reached under the block (ctypes, gc, a signal handler, grad mode switched on by another
route) gets nothing for it, and the TAs see where it happened.
"""

from __future__ import annotations

from ..exercise import spec
from ..exercise.verdict import Verdict
from ..replay.results import RunResult
from ..replay.run import ReplayOutput
from ..untrusted.protocol import BLOCK
from .flags import Flag
from .outcomes import Outcomes

NO_CREDIT = "computed with autograd: no credit (a gradient must be your own formula; autograd only checks it)"


def made_by_autograd(found: Outcomes) -> list[str]:
    """The grade ids right when autograd could run and wrong when it could not."""
    made = [gid for gid, o in found.gradients.items() if o.watched and o.blocked is False]
    if found.trained_watched and found.trained_blocked is False:
        made.append(spec.TRAINING.grade_id)
    return made


def evidence(runs: list[RunResult], kinds: tuple[str, ...]) -> str:
    """Where the runs reached for autograd: "torch.autograd.grad (ex1_solution, lines 12, 14); ..."."""
    where: dict[tuple[str, str], list[int]] = {}
    for e in (e for r in runs for e in r.meta.get("autograd", []) if e["kind"] in kinds):
        lines = where.setdefault((e["what"], e["cell"]), [])
        if e["line"] and e["line"] not in lines:
            lines.append(e["line"])
    said = [
        f"{what} ({cell}, line{'s' if len(lines) > 1 else ''} {', '.join(map(str, lines))})"
        if lines
        else f"{what} ({cell})"
        for (what, cell), lines in where.items()
    ]
    return "; ".join(said[:4]) + (f"; and {len(said) - 4} more" if len(said) > 4 else "")


def _say(v: Verdict, text: str, problem: str | None = None) -> None:
    v.hint, v.lines = text, [*v.lines[:1], text]
    v.problem = problem or v.problem


def apply_policy(verdicts: dict[str, Verdict], found: Outcomes, out: ReplayOutput, policy: str) -> list[Flag]:
    """Turn the comparison into verdicts (policy "zero") and flags (both policies)."""
    ran = [r for r in out.runs.values() if not r.by]  # a stand-in's events are its maker's
    blocked_runs = [r for r in (ran if out.mode == BLOCK else [out.counterpart]) if r]
    worked_around = evidence(blocked_runs, ("bypass", "tamper"))
    made = made_by_autograd(found)
    used = evidence([r for r in (out.blocked, out.watched) if r], ("call", "bypass"))
    flags, lost = [], []
    for gid in made:
        v = verdicts[gid]
        if policy == "zero" and v.score < v.max_score:
            _say(v, NO_CREDIT, "autograd")
            lost.append(gid)
    if policy == "zero" and lost:
        flags.append(Flag("autograd", f"right only when autograd could run: {used}; no credit", lost))
    kept = [gid for gid in made if verdicts[gid].score > 0]
    if policy == "flag" and kept:
        flags.append(Flag("autograd", f"right only when autograd could run: {used}; graded as allowed", kept))
    if worked_around:
        affected = [gid for gid, v in verdicts.items() if v.score < v.max_score]
        flags.append(
            Flag("tampering", f"tried to get under the kit's autograd check: {worked_around}", affected)
        )
    return flags
