"""Running a submission's code: inside bubblewrap where the machine has it, under resource
limits always. Used for the autograde kernel (kernel.py) and for the replay server
(grader/replay/client.py).

Inside: the system, the Python installation and, of the kit, only what runs with the
student's code (VISIBLE_INSIDE: grader/untrusted/ and the exercise's public definition in
grader/exercise/; never the judge or the reference answers), all read-only; one
writable folder (a scratch copy of the submission's, or the replay's exchange folder); a
private /tmp; no network; its own process tree; a user with no rights outside (when the
grader runs as root). Nothing else of the machine: not source/, not the gradebook, not
the other submissions, not the TA's home.

Where bubblewrap cannot start (probe.py says why), nothing runs a submission unless staff
allowed it (BACKPROP_NINJA_ALLOW_UNSANDBOXED=1, which `--allow-unsandboxed` and
c.LimitedExecute.allow_unsandboxed set): Sandbox.isolated, which every launch asks, raises
SandboxUnavailable instead. Allowed, Sandbox.command is a mode of its own, not bubblewrap with
parts left out: the environment is still the sandbox's alone (inside_environment), and the
limits still apply; the folders it was asked to map are the real ones (a folder asked to appear
elsewhere is refused, not dropped), and what is gone is said once per process (unconfined.py).
Run by root, a submission still runs as a uid of its own, so it cannot write the grader's files
or read those closed to others.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path

from ..settings import PACKAGE_LOOKUP_SECONDS, PROBE_TMP_MB, env
from ..untrusted.protocol import KIT_INSIDE
from . import unconfined, users
from .probe import SandboxUnavailable, Status, probe, unsandboxed_allowed

PACKAGE = Path(__file__).resolve().parents[1]
# The kit's files the sandbox sees: the untrusted side, the public definition of the exercise
# it imports, and the hidden tests' entry point. A unit test checks they import nothing else.
VISIBLE_INSIDE = KIT_INSIDE

SANDBOX_UID = 65534  # nobody; each sandbox gets a uid of its own instead (with_own_user)


def _limit(name: str):
    """A limit's default is its environment variable's (grader/settings.py's ENVIRONMENT)."""
    return field(default_factory=lambda: env(f"BACKPROP_NINJA_{name.upper()}"))


@dataclass
class Limits:
    """Of each sandboxed process; every field is BACKPROP_NINJA_<FIELD> (grader/settings.py)."""

    memory_mb: int = _limit("memory_mb")
    processes: int = _limit("processes")
    file_mb: int = _limit("file_mb")
    cpu_seconds: int = _limit("cpu_seconds")
    open_files: int = _limit("open_files")
    disk_mb: int = _limit("disk_mb")
    tmp_mb: int = _limit("tmp_mb")

    def apply(self) -> None:
        """In the child, before exec: the limits pass on to everything it starts."""
        mb = 1024 * 1024
        for which, value in (
            (resource.RLIMIT_AS, self.memory_mb * mb),
            (resource.RLIMIT_FSIZE, self.file_mb * mb),
            (resource.RLIMIT_CPU, self.cpu_seconds),
            (resource.RLIMIT_NOFILE, self.open_files),
            (resource.RLIMIT_NPROC, self.processes),
            (resource.RLIMIT_CORE, 0),
        ):
            resource.setrlimit(which, (value, value))


@lru_cache(maxsize=1)
def sandbox_status() -> Status:
    """Once per process: whether the kit's sandbox starts here, and if not, why (probe.py)."""
    return probe(_base_args())


def bwrap_works() -> bool:
    """bwrap is installed and can make its namespaces here (containers may forbid it)."""
    return sandbox_status().works


THP = "/sys/kernel/mm/transparent_hugepage"


def _base_args(tmp_mb: int = PROBE_TMP_MB) -> list[str]:
    # No user namespace: bwrap runs as the grader, and setpriv then drops to a real, powerless uid.
    args = [
        "--die-with-parent",
        "--new-session",
        "--unshare-ipc",
        "--unshare-pid",
        "--unshare-net",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--ro-bind",
        "/usr",
        "/usr",
    ]
    for top in ("bin", "lib", "lib32", "lib64", "sbin"):
        p = Path("/") / top
        if p.is_symlink():
            args += ["--symlink", os.readlink(p), str(p)]
        elif p.is_dir():
            args += ["--ro-bind", str(p), str(p)]
    args += [
        "--ro-bind",
        "/etc",
        "/etc",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        *_parents(Path(THP)),
        "--ro-bind-try",  # glibc reads it before it asks for huge pages (inside_environment)
        THP,
        THP,
        "--perms",
        "1777",
        "--size",
        str(tmp_mb * 1024 * 1024),
        "--tmpfs",
        "/tmp",
    ]
    readable = sorted({Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve()})
    for path in readable:
        args += _parents(path) + ["--ro-bind", str(path), str(path)]
    return args + _kit_args(readable)


@lru_cache(maxsize=1)
def package_inside() -> Path:
    """Where a `python -I` finds the kit: the folder an editable install points at, or
    site-packages. It may differ from PACKAGE, the copy this process imported (a course
    folder with the kit in it, graded with another checkout's virtualenv)."""
    if sys.flags.isolated:  # this process is such a Python (the kernel launcher): no need to ask
        return PACKAGE
    found = subprocess.run(
        [sys.executable, "-I", "-c", "import grader, os; print(os.path.dirname(grader.__file__))"],
        capture_output=True,
        text=True,
        timeout=PACKAGE_LOOKUP_SECONDS,
        cwd="/",
    )
    path = found.stdout.strip()
    return Path(path).resolve() if found.returncode == 0 and path else PACKAGE


def _kit_args(bound: list[Path]) -> list[str]:
    """This process's VISIBLE_INSIDE, read-only, where the sandboxed Python looks for the kit;
    where that place is inside a bound tree (a non-editable install in site-packages), the
    rest of the package there is covered up."""
    inside = package_inside()
    in_bound_tree = any(inside.is_relative_to(b) for b in bound)
    args = []
    for name in VISIBLE_INSIDE:
        args += ([] if in_bound_tree else _parents(inside / name)) + [
            "--ro-bind",
            str(PACKAGE / name),
            str(inside / name),
        ]
    if in_bound_tree:
        for entry in sorted(inside.iterdir()):
            if entry.name not in VISIBLE_INSIDE:
                args += ["--tmpfs", str(entry)] if entry.is_dir() else ["--ro-bind", "/dev/null", str(entry)]
    return args


def _parents(path: Path) -> list[str]:
    """bwrap makes mount points' parents 0700; the sandbox user needs to pass through them."""
    out = []
    for parent in reversed(path.parents[:-1]):
        out += ["--perms", "0755", "--dir", str(parent)]
    return out


def inside_environment(outside: Mapping[str, str], extra: dict[str, str] | None = None) -> dict[str, str]:
    """The whole environment of a sandboxed process: nothing else of the grader's passes."""
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": "/tmp",
        "LANG": "C.UTF-8",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "MPLBACKEND": "Agg",
        # malloc's heap on transparent huge pages where the kernel only gives them on request
        # (THP "madvise"): torch's 84 MB of heap is then 42 page-table entries, not 21,000, and
        # each fork of a warm server (a kernel, a replay run) copies and tears down that much less
        "GLIBC_TUNABLES": "glibc.malloc.hugetlb=1",
        # the notebook reads NBGRADER_EXECUTION to shorten training under the grader; the kit's
        # own settings (BACKPROP_NINJA_*) are the grader's, not the submission's business
        **{k: v for k, v in outside.items() if k.startswith("NBGRADER_")},
        **(extra or {}),
    }


@dataclass
class Sandbox:
    limits: Limits = field(default_factory=Limits)
    uid: int = SANDBOX_UID

    @property
    def isolated(self) -> bool:
        """False only where staff allowed grading without bubblewrap; else it works or this
        raises, so no caller runs a submission unsandboxed by accident."""
        if bwrap_works():
            return True
        if unsandboxed_allowed():
            return False
        raise SandboxUnavailable(sandbox_status().reason)

    def command(
        self,
        argv: list[str],
        *,
        writable: dict[str, str] | list[tuple[str, str]],
        cwd: str,
        readonly: dict[str, str] | None = None,
        env: dict[str, str] | None = None,
        scratch: str | None = None,
    ) -> list[str]:
        """`argv` as it runs inside; `writable` and `readonly` map folders outside to where they
        appear inside (`writable` may be pairs, to show one folder in two places); `scratch`,
        a folder inside that is a fresh tmpfs of the disk limit
        (less /tmp's share): all that the submission can write then lives in memory, bounded."""
        env = inside_environment(os.environ, env)
        readonly = list((readonly or {}).items())
        writable = list(writable.items() if isinstance(writable, dict) else writable)
        if not self.isolated:
            return unconfined.command(argv, env, cwd, readonly + writable, uid=self.uid)
        args = ["bwrap", *_base_args(self.limits.tmp_mb)]
        for outside, inside in readonly:
            args += _parents(Path(inside)) + ["--ro-bind", outside, inside]
        for outside, inside in writable:
            args += _parents(Path(inside)) + ["--bind", outside, inside]
        if scratch:
            size = max(1, self.limits.disk_mb - self.limits.tmp_mb) * 1024 * 1024
            args += _parents(Path(scratch)) + ["--perms", "1777", "--size", str(size), "--tmpfs", scratch]
        args += ["--chdir", cwd, "--clearenv"]
        for k, v in env.items():
            args += ["--setenv", k, v]
        if os.geteuid() == 0:  # drop to a user that owns nothing outside
            args += [
                "--",
                "setpriv",
                f"--reuid={self.uid}",
                f"--regid={self.uid}",
                "--clear-groups",
                "--no-new-privs",
                "--",
            ]
        else:
            args += ["--"]
        return args + argv

    def with_own_user(self) -> tuple["Sandbox", users.Lease | None]:
        """This sandbox under a uid of its own (users.py), held by the lease; with or without
        bubblewrap, so an allowed unsandboxed run is not root either."""
        if os.geteuid() != 0:
            return self, None
        lease = users.claim()
        return replace(self, uid=lease.uid), lease

    def give(self, path: Path) -> None:
        """Make a folder the sandbox user's, so it can write there."""
        if os.geteuid() != 0 or not self.isolated:
            return
        for root, _, files in os.walk(path):
            os.chown(root, self.uid, self.uid)
            for name in files:
                os.chown(os.path.join(root, name), self.uid, self.uid, follow_symlinks=False)


def default_sandbox() -> Sandbox:
    """Limits from the environment as it is now (nbgrader_config.py sets them)."""
    return Sandbox(Limits())
