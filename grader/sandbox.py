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

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

SANDBOX_UID = 65534  # nobody
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
    probe = subprocess.run([exe, *_base_args(), "--", sys.executable, "-c", "pass"],
                           capture_output=True, timeout=60)
    return probe.returncode == 0


def _base_args() -> list[str]:
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
             "--perms", "1777", "--size", str(256 * 1024 * 1024), "--tmpfs", "/tmp"]
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

    def command(self, argv: list[str], *, writable: dict[str, str], cwd: str,
                env: dict[str, str] | None = None) -> list[str]:
        """`argv` as it runs inside; `writable` maps folders outside to where they appear inside."""
        env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1",
               "MKL_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1", "MPLBACKEND": "Agg",
               # the notebook reads NBGRADER_EXECUTION to shorten training under the grader
               **{k: v for k, v in os.environ.items() if k.startswith(("NBGRADER_", "BACKPROP_NINJA_"))},
               **(env or {})}
        if not self.isolated:
            return argv
        args = ["bwrap", *_base_args()]
        for outside, inside in writable.items():
            args += _parents(Path(inside)) + ["--bind", outside, inside]
        args += ["--chdir", cwd, "--clearenv"]
        for k, v in env.items():
            args += ["--setenv", k, v]
        if os.geteuid() == 0:  # drop to a user that owns nothing outside
            args += ["--", "setpriv", f"--reuid={self.uid}", f"--regid={self.uid}", "--clear-groups",
                     "--no-new-privs", "--"]
        else:
            args += ["--"]
        return args + argv

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
    for name in ("memory_mb", "processes", "file_mb", "cpu_seconds", "open_files"):
        value = os.environ.get(f"BACKPROP_NINJA_{name.upper()}")
        if value:
            setattr(lim, name, int(value))
    return Sandbox(lim)


# ------------------------------------------------------------------ the kernel
MAX_COPY_MB = 50  # a submission folder bigger than this is not copied whole into the scratch


def _copy_submission(src: Path, dest: Path) -> list[str]:
    skipped, total = [], 0
    dest.mkdir(parents=True)
    for path in sorted(src.rglob("*")):
        rel = path.relative_to(src)
        if path.is_symlink():
            skipped.append(f"{rel} (a link)")
        elif path.is_dir():
            (dest / rel).mkdir(parents=True, exist_ok=True)
        elif path.is_file():
            size = path.stat().st_size
            if total + size > MAX_COPY_MB * 1024 * 1024:
                skipped.append(f"{rel} ({size // 1024} KiB)")
                continue
            total += size
            shutil.copy2(path, dest / rel)
    return skipped


def kernel_main(connection_file: str) -> int:
    """Start an IPython kernel for the autograder inside the sandbox. The notebook's folder
    is seen through a scratch copy: what the kernel writes stays there and is thrown away."""
    conn = json.loads(Path(connection_file).read_text())
    sandbox = default_sandbox()
    python = [sys.executable, "-m", "ipykernel_launcher", "-f"]
    if not sandbox.isolated:
        print(WARNING, file=sys.stderr, flush=True)
        proc = subprocess.Popen(python + [connection_file], preexec_fn=sandbox.limits.apply)
        return _forward_and_wait(proc)
    if conn.get("transport") != "ipc" or not os.path.isabs(conn.get("ip", "")):
        print("ERROR: the sandboxed kernel needs c.KernelManager.transport = 'ipc' (the sandbox has no "
              "network, not even localhost) and an absolute c.KernelManager.ip", file=sys.stderr, flush=True)
        return 2
    cwd = Path.cwd()
    scratch = Path(tempfile.mkdtemp(prefix="bn-kernel-"))
    try:
        work = scratch / "work"
        for note in _copy_submission(cwd, work):
            print(f"sandbox: not copied into the kernel's folder: {note}", file=sys.stderr)
        inside_conn = work / ".kernel-connection.json"
        shutil.copy(connection_file, inside_conn)
        sandbox.give(scratch)
        ipc_dir = str(Path(conn["ip"]).parent)
        cmd = sandbox.command(python + [str(cwd / inside_conn.name)],
                              writable={str(work): str(cwd), ipc_dir: ipc_dir}, cwd=str(cwd))
        with open(scratch / "kernel.log", "wb") as log:
            proc = subprocess.Popen(cmd, preexec_fn=sandbox.limits.apply, stdout=log, stderr=subprocess.STDOUT)
            code = _forward_and_wait(proc)
        if code not in (0, -signal.SIGTERM, -signal.SIGKILL):
            tail = (scratch / "kernel.log").read_bytes()[-2000:].decode(errors="replace")
            print(f"sandbox: the kernel in {cwd} exited with {code}:\n{tail}", file=sys.stderr, flush=True)
        return code
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


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
    """Where kernels put their connection files and IPC sockets: the sandbox user may create
    its sockets there (1733: write, no listing) but cannot read the connection files."""
    path = Path(tempfile.gettempdir()) / f"backprop-ninja-runtime-{os.getuid()}"
    path.mkdir(mode=0o1733, exist_ok=True)
    os.chmod(path, 0o1733)
    return str(path)


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
