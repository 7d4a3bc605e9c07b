"""Whether bubblewrap can run a submission here, and if not, why in words a TA can act on.

Three failures look alike from outside ("the sandbox did not start") and need different
fixes: no bwrap at all (install it), a bwrap that cannot create namespaces (a container or a
kernel setting forbids them: run elsewhere, or allow it), and a bwrap that exits non-zero
whatever it is asked (a broken install, a wrapper, a fake on PATH). So the probe goes in
steps, each one's exit code and stderr kept for the reason: `bwrap --version`, then the
smallest sandbox with the namespaces the kit unshares, then the kit's own sandbox.

When it fails, grading refuses (`refusal`: the same words for the batch, nbgrader and
Gradescope) unless staff allowed it (BACKPROP_NINJA_ALLOW_UNSANDBOXED=1), and then warns.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass

from ..settings import PROBE_SECONDS, env

ALLOW_ENV = "BACKPROP_NINJA_ALLOW_UNSANDBOXED"
WARNING = (
    "WARNING: the bubblewrap sandbox could not start (`backprop-ninja check` says why) and "
    "grading without it was allowed: submissions run WITHOUT a sandbox, under resource limits only; "
    "graded by root, as a uid of their own (they read what any user can, and use the network), "
    "else as the grader (they read and write what it can)."
)


class SandboxUnavailable(RuntimeError):
    """Student code was about to run without bubblewrap, and nobody allowed that."""

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(refusal(reason))


def refusal(reason: str) -> str:
    """The one message for a refusal: batch, nbgrader and Gradescope all say it so."""
    return (
        f"not graded: the sandbox could not start ({reason}). Fix it (`backprop-ninja check`), "
        f"or allow grading without it, where no student can reach the grader: {ALLOW_ENV}=1, "
        "`backprop-ninja grade --allow-unsandboxed`, c.LimitedExecute.allow_unsandboxed = True, or "
        "`backprop-ninja gradescope build --allow-unsandboxed`"
    )


def refused_reason(log: str) -> str | None:
    """The reason of a refusal found in a log (an nbgrader run's), or None."""
    found = re.search(r"not graded: the sandbox could not start \((.*)\)\. Fix it", log)
    return found.group(1) if found else None


def unsandboxed_allowed() -> bool:
    try:
        return bool(env(ALLOW_ENV))
    except ValueError:  # "true", "yes": meant as yes
        return os.environ[ALLOW_ENV].strip().lower() in ("true", "yes", "on")


def warning(reason: str) -> str:
    return f"{WARNING} Why: {reason}"


# The namespaces _base_args unshares (bwrap.py), around a command that needs nothing else
NAMESPACES = ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts"]
MINIMAL = [*NAMESPACES, "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--", "true"]


@dataclass(frozen=True)
class Status:
    works: bool
    reason: str = ""  # why not, with bwrap's own words; empty when it works


def _said(proc: subprocess.CompletedProcess) -> str:
    text = " ".join((proc.stderr or proc.stdout or "").split())[:300]
    return f": {text}" if text else " (no output)"


def _failed(argv: list[str]) -> tuple[str | None, str]:
    """(how the command failed, in words, or None; its stdout)."""
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=PROBE_SECONDS, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired:
        return f"gave no answer in {PROBE_SECONDS} s", ""
    except OSError as e:
        return f"cannot be run ({e.strerror or e})", ""
    return (None if proc.returncode == 0 else f"exited {proc.returncode}{_said(proc)}"), proc.stdout


def probe(kit_args: list[str]) -> Status:
    """Uncached: `kit_args` are the arguments of the kit's sandbox (bwrap._base_args())."""
    exe = shutil.which("bwrap")
    if not exe:
        return Status(
            False, "bubblewrap is not installed: no bwrap on PATH (Debian: apt-get install bubblewrap)"
        )
    how, version = _failed([exe, "--version"])
    if how:
        return Status(False, f"{exe} does not work: `bwrap --version` {how}")
    named = f"{exe}, {version.strip() or 'bubblewrap'}"
    how, _ = _failed([exe, *MINIMAL])
    if how:
        return Status(
            False,
            f"bubblewrap is installed ({named}) but cannot create namespaces here "
            "(a container or a kernel setting that forbids them?): "
            f"`bwrap {' '.join(NAMESPACES)} --ro-bind / / ... true` {how}",
        )
    how, _ = _failed([exe, *kit_args, "--", sys.executable, "-I", "-c", "pass"])
    if how:
        return Status(False, f"bubblewrap ({named}) creates namespaces, but the kit's sandbox {how}")
    return Status(True)
