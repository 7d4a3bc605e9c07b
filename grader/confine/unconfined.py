"""Where bubblewrap cannot start and staff allowed grading without it: a command of its own,
not bubblewrap with parts left out. The environment is still the sandbox's alone
(bwrap.inside_environment), the limits still apply, a folder is seen only where it is (one
asked to appear elsewhere is refused, not dropped), and what is gone is said once per process."""

from __future__ import annotations

import logging
import os

from .probe import WARNING

# What bubblewrap gives and a command without it has not (beside probe.py's WARNING)
GONE_UNSANDBOXED = (
    "no mount namespace: the folders mapped in are the real paths, writable wherever the user may "
    "write (read-only mappings included), and the rest of the machine is as visible as to any "
    "process of that user, the kit's judge and reference answers included",
    "no read-only system or Python installation",
    "no private /tmp: the machine's own",
    "the network is reachable",
    "no process tree of its own: other processes of the same user can be seen and signalled",
    "no scratch in memory: what it writes goes to disk, bounded per file only",
)
_log = logging.getLogger(__name__)
_said_gone = False  # GONE_UNSANDBOXED is said once per process


def command(
    argv: list[str], env: dict[str, str], cwd: str, mapped: list[tuple[str, str]], *, uid: int
) -> list[str]:
    """Allowed without bubblewrap: `argv` in `cwd` with the sandbox's environment and nothing
    else of the grader's, as the sandbox's uid when root (as another user, the grader's files
    closed to others stay closed), else as the grader. No folder can appear anywhere but
    where it is: a mapping to another place is refused (ValueError), not dropped."""
    elsewhere = [f"{o} as {i}" for o, i in mapped if os.path.normpath(o) != os.path.normpath(i)]
    if elsewhere:
        raise ValueError(
            "without bubblewrap a folder is seen only where it is; asked for " + ", ".join(elsewhere)
        )
    _say_what_is_gone([o for o, _ in mapped])
    start = ["env", "-i", "-C", cwd, *(f"{k}={v}" for k, v in env.items())]
    if os.geteuid() != 0:
        return [*start, *argv]
    drop = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--no-new-privs"]
    return [*start, *drop, "--", *argv]


def _say_what_is_gone(mapped: list[str]) -> None:
    """Once per process, on the first command without bubblewrap: probe.py's WARNING, and what
    exactly is gone."""
    global _said_gone
    if _said_gone:
        return
    _said_gone = True
    folders = f" (here: {', '.join(mapped)})" if mapped else ""
    _log.warning(
        "%s Without it: %s. Kept: the resource limits and an environment of its own.",
        WARNING,
        "; ".join(GONE_UNSANDBOXED).replace("are the real paths,", f"are the real paths{folders},", 1),
    )
