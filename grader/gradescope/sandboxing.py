"""On Gradescope, before a submission's code runs: may it run here, and if staff allowed it
to run without the sandbox, what must first be closed to it.

Gradescope's container may refuse namespaces, and bubblewrap then cannot start. The zip holds
the solutions (the instructor's notebook, the kit's answers) and grading writes a gradebook:
a student's code that reads the first or writes the second grades itself (issue 17: 38/38
from nothing). So without the sandbox the submission is not graded (results.refused), unless
the zip was built with --allow-unsandboxed; then grading needs root, so the kernel and the
replay run as uids of their own (grader/preprocessors/unsandboxed.py, grader/confine/bwrap.py),
and everything of the grader's they could otherwise read is closed to other users first.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

from ..confine.bwrap import VISIBLE_INSIDE, package_inside, sandbox_status

NEEDS_ROOT = (
    "and grading without it needs the autograder to run as root (Gradescope's does), so that the "
    "student's code runs as another user"
)


def decide(settings: dict) -> tuple[str | None, str | None]:
    """(why the sandbox cannot start, or None; why not to grade at all, or None)."""
    status = sandbox_status()
    if status.works:
        return None, None
    if not settings.get("allow_unsandboxed"):
        return status.reason, status.reason
    if os.geteuid() != 0:
        return status.reason, f"{status.reason}; {NEEDS_ROOT}"
    return status.reason, None


def _close(path: Path) -> None:
    """Nothing for group and others: the grader (root) still reads it; a link is left alone."""
    if not path.is_symlink():
        os.chmod(path, stat.S_IMODE(path.stat().st_mode) & 0o700)


def _installed_copy(kit: Path, source: Path) -> bool:
    """The kit as pip installed it in this image (or the zip's copy), not someone's checkout."""
    trees = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(), source.resolve()}
    return any(kit.resolve().is_relative_to(t) for t in trees)


def lock_down(*, source: Path, work: Path) -> list[str]:
    """Close `source` (the zip: the instructor's notebook, the kit) and `work` (the copy of the
    course nbgrader grades in, the gradebook) to other users, and the kit's parts a
    submission never needs (all but VISIBLE_INSIDE, as in the sandbox). Returns what could
    not be closed, for the warning."""
    work.mkdir(parents=True, exist_ok=True)
    for path in (source, work):
        _close(path)
    kit = package_inside()
    if not _installed_copy(kit, source):
        return [f"the kit at {kit} is not an installed copy (editable?): its answers stay readable"]
    for path in sorted(kit.iterdir()):
        if path.name not in VISIBLE_INSIDE:
            _close(path)
    return []
