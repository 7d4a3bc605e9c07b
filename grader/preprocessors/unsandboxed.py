"""Where nbgrader decides to run a submission without bubblewrap: it does not, unless staff
said so (c.LimitedExecute.allow_unsandboxed, `backprop-ninja grade --allow-unsandboxed`,
or BACKPROP_NINJA_ALLOW_UNSANDBOXED=1). Not a preprocessor: the rule LimitedExecute (the
kernel) and ReplayGrades (the replay) both apply, and the kernel's provisioner when allowed.

Allowed and run by root, the kit's kernel still does not run as root: it runs as a uid of its
own (grader/confine/users.py) in a folder of that uid's, with a copy of the submission as its
working folder, the sandbox's environment and limits, so it can neither write the grader's
files nor read those closed to others; when it ends, every process of that uid is killed. The
replay does the same (grader/confine/bwrap.py, Sandbox._unsandboxed).
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
from jupyter_client.provisioning import LocalProvisioner
from traitlets.config import Config

from ..confine import make_kernel_dir, users
from ..confine.bwrap import Limits, inside_environment, sandbox_status
from ..confine.kernel import copy_submission
from ..confine.probe import ALLOW_ENV, SandboxUnavailable, refusal, unsandboxed_allowed, warning
from ..settings import course_config

ALLOW_FLAG = "--LimitedExecute.allow_unsandboxed=True"  # what the batch and Gradescope pass to nbgrader
LAUNCHER = ["-I", "-m", "grader.confine", "kernel"]  # the kit's kernel spec: argv[1:5]
_warned: set[str] = set()


def is_sandbox_launcher(argv: list[str]) -> bool:
    return list(argv[1:5]) == LAUNCHER


def kernel_problem(kernel_name: str) -> str | None:
    """Why a kernel of this name would run the submission without bubblewrap, or None."""
    try:
        argv = KernelSpecManager().get_kernel_spec(kernel_name).argv
    except NoSuchKernel:
        return None  # nbclient says so itself, before anything runs
    if not is_sandbox_launcher(argv):
        return f"the kernel {kernel_name!r} is not the kit's sandboxed kernel (backprop-ninja-sandbox)"
    return replay_problem()


def replay_problem() -> str | None:
    status = sandbox_status()
    return None if status.works else status.reason


def apply_rule(problem: str | None, *, allowed: bool, log) -> None:
    """Refuse (SandboxUnavailable) or, allowed, warn loudly, once per reason and process, and
    record it where Sandbox.isolated looks (the replay's launch here, and the kit's kernel
    launcher where grading is not root), which otherwise refuses too."""
    if problem is None:
        return
    if not allowed:
        raise SandboxUnavailable(problem)
    os.environ[ALLOW_ENV] = "1"
    if problem not in _warned:
        _warned.add(problem)
        log.warning("%s", "!" * 78)
        log.warning("%s", warning(problem))
        log.warning("%s", "!" * 78)


def before_batch(course: Path, allowed: bool) -> tuple[str | None, str | None]:
    """(the refusal every worker would meet, said once before any starts; or the warning):
    allowed by `allowed` (--allow-unsandboxed), the course's c.LimitedExecute.allow_unsandboxed
    or BACKPROP_NINJA_ALLOW_UNSANDBOXED (the trait's default, as LimitedExecute reads it)."""
    problem = replay_problem()
    if problem is None:
        return None, None
    configured = Config(course_config(course)).LimitedExecute.get("allow_unsandboxed")
    if allowed or (unsandboxed_allowed() if configured is None else bool(configured)):
        return None, warning(problem)
    return refusal(problem), None


_root: Path | None = None


def _kernels_root() -> Path:
    """This grading process's folder for unsandboxed kernels' folders: others may pass
    through (a kernel's uid reaches its own folder) but not list it."""
    global _root
    if _root is None:
        _root = Path(tempfile.mkdtemp(prefix="bn-unsandboxed-"))
        os.chmod(_root, 0o711)
        atexit.register(shutil.rmtree, _root, ignore_errors=True)
    return _root


def kernel_dir() -> Path:
    """One kernel's folder (as make_kernel_dir), its uid's once the kernel starts."""
    return make_kernel_dir(str(_kernels_root()))


def drops_root(km) -> bool:
    """This kernel would run as root without bubblewrap: the kit's launcher, started by root."""
    return os.geteuid() == 0 and is_sandbox_launcher(km.kernel_spec.argv)


def hand_over(km, home: Path) -> None:
    """The kernel's sockets, connection file and process in `home`, under a uid of its own."""
    km.ip = str(home / "ipc" / "kernel")
    km.connection_file = str(home / "connection.json")
    km.kernel_id = km.kernel_id or str(uuid.uuid4())
    km.provisioner = UnsandboxedProvisioner(kernel_id=km.kernel_id, kernel_spec=km.kernel_spec, parent=km)
    km.provisioner.home = home


def _chown_tree(path: Path, uid: int) -> None:
    for root, dirs, files in os.walk(path):
        os.chown(root, uid, uid)
        for name in dirs + files:
            os.chown(os.path.join(root, name), uid, uid, follow_symlinks=False)


class UnsandboxedProvisioner(LocalProvisioner):
    """A LocalProvisioner whose kernel runs as a uid of its own, in its own folder. The kit's
    launcher is not used: without bubblewrap all it does is apply the limits and end with the
    grader, which this does too, and the kernel is then the only process of that uid."""

    home: Path | None = None  # kernel_dir(); set by hand_over
    lease: users.Lease | None = None

    async def launch_kernel(self, cmd: list[str], **kwargs):
        self.lease = users.claim()
        uid, home = self.lease.uid, self.home
        scratch, private = home / "scratch", home / "home"
        copy_submission(Path(kwargs.get("cwd") or os.getcwd()), scratch)
        private.mkdir(mode=0o700)
        _chown_tree(home, uid)  # the connection file too, written by the grader before the launch
        kwargs["cwd"] = str(scratch)
        kwargs["env"] = inside_environment(os.environ, {"HOME": str(private)})
        kwargs["preexec_fn"] = Limits().apply
        drop = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--no-new-privs"]
        kernel = [cmd[0], "-I", "-m", "ipykernel_launcher", "-f", cmd[-1]]  # cmd: python ... -f FILE
        return await super().launch_kernel([*drop, "--pdeathsig", "TERM", "--", *kernel], **kwargs)

    async def cleanup(self, restart: bool = False) -> None:
        await super().cleanup(restart)
        if self.lease:  # whatever the kernel left running (setsid daemons included) ends with it
            uid = self.lease.uid
            subprocess.run(
                ["kill", "-KILL", "-1"],
                user=uid,
                group=uid,
                extra_groups=[],
                capture_output=True,
                check=False,
            )
            self.lease.close()
            self.lease = None
