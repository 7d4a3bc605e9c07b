"""Running a submission's code: inside bubblewrap where the machine has it, under resource
limits always. Used for the autograde kernel (a Jupyter kernel spec runs `python -m
grader.sandbox kernel -f {connection_file}`) and for the replay server (judge.py).

Inside: the system, the Python installation and the kit's package, read-only; one
writable folder (a scratch copy of the submission's, or the replay's exchange folder); a
private /tmp; no network; its own process tree; a user with no rights outside (when the
grader runs as root). Nothing else of the machine: not source/, not the gradebook, not
the other submissions, not the TA's home.
"""
from __future__ import annotations

import atexit
import json
import os
import resource
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path

from . import sandbox_users

SANDBOX_UID = 65534  # nobody; each sandbox gets a uid of its own instead (with_own_user)
WARNING = ("WARNING: bubblewrap (bwrap) is not available: submissions run WITHOUT a sandbox, "
           "under resource limits only. They can read and write what the grader can. "
           "Install bubblewrap (Debian: apt-get install bubblewrap).")


@dataclass
class Limits:
    memory_mb: int = 6144      # address space of each process (torch maps ~2 GB at import)
    processes: int = 256       # for the sandbox user; a fork bomb stops here
    file_mb: int = 64          # the largest file a submission can write
    cpu_seconds: int = 1200    # CPU time of each process
    open_files: int = 512
    disk_mb: int = 1024        # all a submission can write: its folder and /tmp, both tmpfs
    tmp_mb: int = 256          # of which /tmp

    def apply(self) -> None:
        """In the child, before exec: the limits pass on to everything it starts."""
        mb = 1024 * 1024
        for which, value in ((resource.RLIMIT_AS, self.memory_mb * mb), (resource.RLIMIT_FSIZE, self.file_mb * mb),
                             (resource.RLIMIT_CPU, self.cpu_seconds), (resource.RLIMIT_NOFILE, self.open_files),
                             (resource.RLIMIT_NPROC, self.processes), (resource.RLIMIT_CORE, 0)):
            resource.setrlimit(which, (value, value))


@lru_cache(maxsize=1)
def bwrap_works() -> bool:
    """bwrap is installed and can make its namespaces here (containers may forbid it)."""
    exe = shutil.which("bwrap")
    if not exe:
        return False
    probe = subprocess.run([exe, *_base_args(), "--", sys.executable, "-I", "-c", "pass"],
                           capture_output=True, timeout=60)
    return probe.returncode == 0


def _base_args(tmp_mb: int = 256) -> list[str]:
    # No user namespace: bwrap runs as the grader, and setpriv then drops to a real, powerless uid.
    args = ["--die-with-parent", "--new-session", "--unshare-ipc", "--unshare-pid", "--unshare-net",
            "--unshare-uts", "--unshare-cgroup-try", "--ro-bind", "/usr", "/usr"]
    for top in ("bin", "lib", "lib32", "lib64", "sbin"):
        p = Path("/") / top
        if p.is_symlink():
            args += ["--symlink", os.readlink(p), str(p)]
        elif p.is_dir():
            args += ["--ro-bind", str(p), str(p)]
    args += ["--ro-bind", "/etc", "/etc", "--proc", "/proc", "--dev", "/dev",
             "--perms", "1777", "--size", str(tmp_mb * 1024 * 1024), "--tmpfs", "/tmp"]
    readable = {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(), Path(__file__).resolve().parent}
    for path in sorted(readable):
        args += _parents(path) + ["--ro-bind", str(path), str(path)]
    return args


def _parents(path: Path) -> list[str]:
    """bwrap makes mount points' parents 0700; the sandbox user needs to pass through them."""
    out = []
    for parent in reversed(path.parents[:-1]):
        out += ["--perms", "0755", "--dir", str(parent)]
    return out


@dataclass
class Sandbox:
    limits: Limits = field(default_factory=Limits)
    uid: int = SANDBOX_UID

    @property
    def isolated(self) -> bool:
        return bwrap_works()

    def command(self, argv: list[str], *, writable: dict[str, str], cwd: str, readonly: dict[str, str] | None = None,
                env: dict[str, str] | None = None, scratch: str | None = None) -> list[str]:
        """`argv` as it runs inside; `writable` and `readonly` map folders outside to where they
        appear inside; `scratch`, a folder inside that is a fresh tmpfs of the disk limit
        (less /tmp's share): all that the submission can write then lives in memory, bounded."""
        env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1",
               "MKL_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1", "MPLBACKEND": "Agg",
               # the notebook reads NBGRADER_EXECUTION to shorten training under the grader
               **{k: v for k, v in os.environ.items() if k.startswith(("NBGRADER_", "BACKPROP_NINJA_"))},
               **(env or {})}
        if not self.isolated:
            return argv
        args = ["bwrap", *_base_args(self.limits.tmp_mb)]
        for outside, inside in (readonly or {}).items():
            args += _parents(Path(inside)) + ["--ro-bind", outside, inside]
        for outside, inside in writable.items():
            args += _parents(Path(inside)) + ["--bind", outside, inside]
        if scratch:
            size = max(1, self.limits.disk_mb - self.limits.tmp_mb) * 1024 * 1024
            args += _parents(Path(scratch)) + ["--perms", "1777", "--size", str(size), "--tmpfs", scratch]
        args += ["--chdir", cwd, "--clearenv"]
        for k, v in env.items():
            args += ["--setenv", k, v]
        if os.geteuid() == 0:  # drop to a user that owns nothing outside
            args += ["--", "setpriv", f"--reuid={self.uid}", f"--regid={self.uid}", "--clear-groups",
                     "--no-new-privs", "--"]
        else:
            args += ["--"]
        return args + argv

    def with_own_user(self) -> tuple["Sandbox", sandbox_users.Lease | None]:
        """This sandbox under a uid of its own (grader/sandbox_users.py), held by the lease."""
        if os.geteuid() != 0 or not self.isolated:
            return self, None
        lease = sandbox_users.claim()
        return replace(self, uid=lease.uid), lease

    def give(self, path: Path) -> None:
        """Make a folder the sandbox user's, so it can write there."""
        if os.geteuid() != 0 or not self.isolated:
            return
        for root, dirs, files in os.walk(path):
            os.chown(root, self.uid, self.uid)
            for name in files:
                os.chown(os.path.join(root, name), self.uid, self.uid, follow_symlinks=False)



def default_sandbox() -> Sandbox:
    """Limits from the environment (nbgrader_config.py sets them): BACKPROP_NINJA_MEMORY_MB etc."""
    lim = Limits()
    for name in ("memory_mb", "processes", "file_mb", "cpu_seconds", "open_files", "disk_mb", "tmp_mb"):
        value = os.environ.get(f"BACKPROP_NINJA_{name.upper()}")
        if value:
            setattr(lim, name, int(value))
    return Sandbox(lim)


# ------------------------------------------------------------------ the kernel
MAX_COPY_MB = 50  # a submission folder bigger than this is not copied whole into the scratch


def _copy_submission(src: Path, dest: Path) -> list[str]:
    """Regular files and folders only, never through a link, at most MAX_COPY_MB in all."""
    skipped, total = [], 0
    dest.mkdir(parents=True)
    for root, dirs, files in os.walk(src, followlinks=False):
        here = Path(root)
        for name in sorted(dirs + files):
            path = here / name
            rel = path.relative_to(src)
            st = path.lstat()
            if stat.S_ISDIR(st.st_mode):
                (dest / rel).mkdir(parents=True, exist_ok=True)
            elif not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:
                skipped.append(f"{rel} (not a plain file)")
            elif total + st.st_size > MAX_COPY_MB * 1024 * 1024:
                skipped.append(f"{rel} ({st.st_size // 1024} KiB)")
            else:
                total += st.st_size
                shutil.copyfile(path, dest / rel, follow_symlinks=False)
    return skipped


KERNEL_DIR_PREFIX = "bn-kernel-"
SUBMISSION_INSIDE = "/run/submission"  # the read-only copy the kernel's folder is filled from


def make_kernel_dir(runtime_root: str) -> Path:
    """A folder of one kernel's own (SandboxedExecute makes one per kernel): `ipc/` for its
    sockets, the only part of it any sandbox sees, and `scratch/` for the copy of the
    submission it starts from. Removing it removes everything the kernel left."""
    home = Path(tempfile.mkdtemp(prefix=KERNEL_DIR_PREFIX, dir=runtime_root))
    (home / "ipc").mkdir(mode=0o700)
    return home


KERNEL = [sys.executable, "-m", "ipykernel_launcher", "-f"]
PORTS = ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")


def _kernel_home(conn: dict, connection_file: str) -> tuple[Path, dict, list[Path]]:
    """(this kernel's folder, the connection info the kernel gets, links to remove after).
    SandboxedExecute gives each kernel a socket folder of its own. A kernel started by plain
    nbgrader (validate, the formgrader) has its sockets in the shared runtime folder: then
    they are made in a folder of its own here, and the names the client knows link to them."""
    if conn.get("transport") != "ipc" or not os.path.isabs(conn.get("ip", "")):
        raise ValueError("the sandboxed kernel needs c.KernelManager.transport = 'ipc' and an absolute "
                         "c.KernelManager.ip (the sandbox has no network, not even localhost)")
    ip = Path(conn["ip"])
    if ip.parent.name == "ipc" and ip.parent.parent.name.startswith(KERNEL_DIR_PREFIX):
        return ip.parent.parent, conn, []
    home = make_kernel_dir(str(Path(connection_file).resolve().parent))
    inside = home / "ipc" / "kernel"
    links = [Path(f"{ip}-{conn[port]}") for port in PORTS]
    for link, port in zip(links, PORTS):
        link.unlink(missing_ok=True)
        link.symlink_to(f"{inside}-{conn[port]}")
    return home, dict(conn, ip=str(inside)), links


def kernel_main(connection_file: str) -> int:
    """Start an IPython kernel for the autograder inside the sandbox. Its folder is a tmpfs
    of the disk limit, filled with a copy of the submission: what it writes is bounded,
    stays there and is thrown away."""
    conn = json.loads(Path(connection_file).read_text())
    sandbox = default_sandbox()
    if not sandbox.isolated:
        print(WARNING, file=sys.stderr, flush=True)
        proc = subprocess.Popen(KERNEL + [connection_file], preexec_fn=sandbox.limits.apply)
        return _forward_and_wait(proc)
    try:
        home, conn, links = _kernel_home(conn, connection_file)
    except ValueError as e:
        print(f"ERROR: {e}", file=sys.stderr, flush=True)
        return 2
    try:
        return _run_kernel(sandbox, home, conn)
    finally:
        for link in links:  # made here for a plain nbgrader kernel: so is its folder
            link.unlink(missing_ok=True)
        if links:
            shutil.rmtree(home, ignore_errors=True)


def _run_kernel(sandbox: Sandbox, home: Path, conn: dict) -> int:
    sandbox, lease = sandbox.with_own_user()  # held while this launcher lives
    cwd, scratch, ipc = Path.cwd(), home / "scratch", home / "ipc"
    for note in _copy_submission(cwd, scratch):
        print(f"sandbox: not copied into the kernel's folder: {note}", file=sys.stderr)
    (scratch / ".kernel-connection.json").write_text(json.dumps(conn))
    os.chmod(scratch / ".kernel-connection.json", 0o644)  # only this sandbox sees scratch/
    sandbox.give(ipc)
    fill = ["sh", "-c", 'cp -R "$0"/. . 2>/dev/null; exec "$@"', SUBMISSION_INSIDE]
    cmd = sandbox.command(fill + KERNEL + [str(cwd / ".kernel-connection.json")],
                          writable={str(ipc): str(ipc)}, readonly={str(scratch): SUBMISSION_INSIDE},
                          scratch=str(cwd), cwd=str(cwd))
    with open(home / "kernel.log", "wb") as log:
        proc = subprocess.Popen(cmd, preexec_fn=sandbox.limits.apply, stdout=log, stderr=subprocess.STDOUT)
        code = _forward_and_wait(proc)
    if lease:
        lease.close()
    if code not in (0, -signal.SIGTERM, -signal.SIGKILL):
        tail = (home / "kernel.log").read_bytes()[-2000:].decode(errors="replace")
        print(f"sandbox: the kernel in {cwd} exited with {code}:\n{tail}", file=sys.stderr, flush=True)
    return code


def _forward_and_wait(proc: subprocess.Popen) -> int:
    def forward(sig, _frame):
        try:
            proc.send_signal(sig)
        except ProcessLookupError:
            pass
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, forward)
    return proc.wait()


def prepare_runtime_dir() -> str:
    """Where this grading process's kernels put their connection files; each kernel's sockets
    go in a folder of its own inside (make_kernel_dir), the only part a sandbox sees. One per
    process, the grader's alone, removed at exit."""
    path = tempfile.mkdtemp(prefix="backprop-ninja-runtime-")
    os.chmod(path, 0o700)
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] == "kernel" and argv[1] == "-f":
        return kernel_main(argv[2])
    if argv == ["check"]:
        print("bubblewrap sandbox: available" if bwrap_works() else WARNING)
        return 0
    print("usage: python -m grader.sandbox kernel -f CONNECTION_FILE | check", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
