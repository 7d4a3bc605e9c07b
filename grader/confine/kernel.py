"""The autograde kernel's launcher: the kernel spec (jupyter/kernels/) runs
`python -I -m grader.confine kernel -f {connection_file}` outside the sandbox; this starts
the IPython kernel inside it, in a folder of its own that is thrown away afterwards."""

from __future__ import annotations

import atexit
import ctypes
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

from ..settings import MAX_COPY_MB
from ..untrusted.protocol import KERNEL_CONNECTION_FILE, KERNEL_OPTIONS, SUBMISSION_INSIDE
from .bwrap import Sandbox, default_sandbox
from .probe import WARNING


def copy_submission(src: Path, dest: Path) -> list[str]:
    """The submission's folder as a kernel starts from it (a cold kernel's scratch here, the warm
    server's inbox in warm.py, an allowed unsandboxed kernel's folder): regular files and folders
    only, never through a link, at most MAX_COPY_MB in all. Returns what was left out, and why."""
    skipped, total = [], 0
    dest.mkdir(parents=True, exist_ok=True)
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


def make_kernel_dir(runtime_root: str) -> Path:
    """A folder of one kernel's own (LimitedExecute makes one per kernel): `ipc/` for its
    sockets, the only part of it any sandbox sees, and `scratch/` for the copy of the
    submission it starts from. Removing it removes everything the kernel left."""
    home = Path(tempfile.mkdtemp(prefix=KERNEL_DIR_PREFIX, dir=runtime_root))
    (home / "ipc").mkdir(mode=0o700)
    return home


KERNEL = [sys.executable, "-m", "ipykernel_launcher", *KERNEL_OPTIONS, "-f"]
PORTS = ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")


def _kernel_home(conn: dict, connection_file: str) -> tuple[Path, dict, list[Path]]:
    """(this kernel's folder, the connection info the kernel gets, links to remove after).
    LimitedExecute gives each kernel a socket folder of its own. A kernel started by plain
    nbgrader (validate, the formgrader) has its sockets in the shared runtime folder: then
    they are made in a folder of its own here, and the names the client knows link to them."""
    if conn.get("transport") != "ipc" or not os.path.isabs(conn.get("ip", "")):
        raise ValueError(
            "the sandboxed kernel needs c.KernelManager.transport = 'ipc' and an absolute "
            "c.KernelManager.ip (the sandbox has no network, not even localhost)"
        )
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
    if not _end_with_parent():
        return 1
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
    for note in copy_submission(cwd, scratch):
        print(f"sandbox: not copied into the kernel's folder: {note}", file=sys.stderr)
    (scratch / KERNEL_CONNECTION_FILE).write_text(json.dumps(conn))
    os.chmod(scratch / KERNEL_CONNECTION_FILE, 0o644)  # only this sandbox sees scratch/
    sandbox.give(ipc)
    fill = ["sh", "-c", 'cp -R "$0"/. . 2>/dev/null; exec "$@"', SUBMISSION_INSIDE]
    cmd = sandbox.command(
        fill + KERNEL + [str(cwd / KERNEL_CONNECTION_FILE)],
        writable={str(ipc): str(ipc)},
        readonly={str(scratch): SUBMISSION_INSIDE},
        scratch=str(cwd),
        cwd=str(cwd),
    )
    with open(home / "kernel.log", "wb") as log:
        proc = subprocess.Popen(cmd, preexec_fn=sandbox.limits.apply, stdout=log, stderr=subprocess.STDOUT)
        code = _forward_and_wait(proc)
    if lease:
        lease.close()
    if code not in (0, -signal.SIGTERM, -signal.SIGKILL):
        tail = (home / "kernel.log").read_bytes()[-2000:].decode(errors="replace")
        print(f"sandbox: the kernel in {cwd} exited with {code}:\n{tail}", file=sys.stderr, flush=True)
    return code


PR_SET_PDEATHSIG = 1


def _end_with_parent() -> bool:
    """A grading process that dies (killed, out of memory) takes its kernel with it: the
    launcher gets SIGTERM, which it forwards to bubblewrap. False if the parent is already gone."""
    parent = os.getppid()
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    return os.getppid() == parent


def _forward_and_wait(proc: subprocess.Popen) -> int:
    def forward(sig, _frame):
        try:
            proc.send_signal(sig)
        except ProcessLookupError:
            pass

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, forward)
    return proc.wait()


RUNTIME_PREFIX = "backprop-ninja-runtime-"
_runtime_dir: tuple[int, str] | None = None  # (pid, folder): a forked child makes its own


def prepare_runtime_dir() -> str:
    """Where this grading process's kernels put their connection files; each kernel's sockets
    go in a folder of its own inside (make_kernel_dir), the only part a sandbox sees. One per
    process, the grader's alone, named with its pid, removed at exit; what a process killed
    by a signal left (no atexit runs then) the next one removes. A process that loads the
    configuration again (a resident nbgrader, at each command) keeps its one folder."""
    global _runtime_dir
    if _runtime_dir and _runtime_dir[0] == os.getpid() and os.path.isdir(_runtime_dir[1]):
        return _runtime_dir[1]
    sweep_runtime_dirs(Path(tempfile.gettempdir()))
    path = tempfile.mkdtemp(prefix=f"{RUNTIME_PREFIX}{os.getpid()}-")
    os.chmod(path, 0o700)
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    _runtime_dir = (os.getpid(), path)
    return path


def sweep_runtime_dirs(tmp: Path) -> list[Path]:
    """Removes the runtime folders in `tmp` of grading processes that are gone: folders, not
    links, of this user, whose name's pid runs no more. Returns what it removed."""
    removed = []
    for entry in tmp.glob(RUNTIME_PREFIX + "*"):
        pid = entry.name[len(RUNTIME_PREFIX) :].split("-")[0]
        try:
            st = entry.lstat()
        except OSError:
            continue
        if not pid.isdigit() or not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
            continue
        if not _running(int(pid)):
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: running
        pass
    return True
