"""Which assignment the kit's grading acts on: its own (spec.ASSIGNMENT). Another assignment of
the same course is graded as plain nbgrader grades it: no rebuild from the kit's notebook, no
replay, no gradient table, no warm kernel made for the kit's first cells. What keeps every
assignment safe stays on for all of them: the sandboxed kernel and its bounds (LimitedExecute),
inert outputs (NeutraliseOutputs), the intake's checks of links; none of them changes a score."""

from __future__ import annotations

from ..exercise import spec


def kit_assignment(resources: dict | None) -> bool:
    """Whether nbgrader is converting the kit's own assignment (its resources say which)."""
    return ((resources or {}).get("nbgrader") or {}).get("assignment") == spec.ASSIGNMENT
