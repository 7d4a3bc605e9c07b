"""The warm kernel server: the autograde kernel without a Python start, an `import torch` or
an ipykernel import per submission. `python -I -m grader.untrusted.zygote` is started once per
grading process by grader/confine/warm.py, inside the same bubblewrap sandbox as a cold
kernel. It imports what every kernel imports, then forks one kernel per request and never
runs a student's code itself.

Each kernel is isolated from the server and from the kernels before it as a replay run is
(isolation.py): a user, PID, mount and IPC namespace of its own, where it is PID 1 (when it
ends or is killed, everything it started dies with it); fresh size-limited tmpfs for its
folder, /tmp (its HOME) and /dev/shm; the sandbox's resource limits; no capabilities. Its
folder is filled from /run/submission, as a cold kernel's is. The server cleans nothing up
between kernels, and needs not: nothing a kernel can write is shown to the next (the server's
own /tmp, which no kernel sees, is covered by each kernel's fresh one; the socket folder is
emptied by the grading process, outside).

Protocol, JSON lines: on stdin {"start": {...}} (see `start`) or {"kill": true}; on the
original stdout {"ready": true} once, {"started": pid} after each fork, or {"refused": why}
when the kernel could not have its clean slate (and does not run), and {"exited": code}
when a started kernel has ended. The kernels hold none of these pipes.
"""

from __future__ import annotations

from . import collector  # first: no collection while the server starts

# isort: split
import importlib.util
import json
import os
import random
import resource
import select
import signal
import struct
import sys

# What a kernel imports anyway, once for all: the saving is the point of this server.
import ipykernel.kernelapp  # noqa: F401
import matplotlib.pyplot  # noqa: F401
import numpy
import torch  # noqa: F401

from . import isolation
from .isolation import real_exit
from .kernel_prefix import Prefix, import_ahead, once_per_cell
from .protocol import IPC_INSIDE, KERNEL_CONNECTION_FILE, KERNEL_OPTIONS, SUBMISSION_INSIDE, KernelStart


def _copy_tree(src: str, dest: str) -> None:
    """`cp -R src/. dest` as the cold kernel's start does: plain files and folders."""
    for root, _dirs, files in os.walk(src, followlinks=False):
        rel = os.path.relpath(root, src)
        here = dest if rel == "." else os.path.join(dest, rel)
        os.makedirs(here, exist_ok=True)
        for name in files:
            with open(os.path.join(root, name), "rb") as fin, open(os.path.join(here, name), "wb") as fout:
                while chunk := fin.read(1 << 20):
                    fout.write(chunk)


def _private_folders(req: KernelStart) -> None:
    """A clean slate, as a replay run gets: a fresh /tmp (which is HOME, so also a fresh IPython
    and matplotlib folder), on which only what the sandbox mounts under /tmp is shown again
    (isolation.fresh_tmp_keeping_mounts: a kit or virtualenv kept there, the socket folder),
    and a fresh /dev/shm; the kernel's own tmpfs over the stage folder, its working folder made
    in it and filled with the submission's copy; every other mount read-only (the socket
    folder aside, which the grading process empties); then no capabilities left. Raises (and
    the server refuses the kernel) where any of it cannot be had."""
    _check_home(req["env"])

    def stage() -> None:
        if not os.path.isdir(req["ipc"]):  # it was in the /tmp just covered, and not shown again
            os.makedirs(req["ipc"], mode=0o755)
            isolation.bind(IPC_INSIDE, req["ipc"])
        os.makedirs(req["stage"], mode=0o755, exist_ok=True)
        isolation.mount_tmpfs(req["stage"], max(1, int(req["disk_mb"]) - int(req["tmp_mb"])), mode=0o755)
        cwd = req["cwd"]
        os.makedirs(cwd, mode=0o755, exist_ok=True)
        os.chmod(cwd, 0o1777)  # as the cold kernel's tmpfs folder
        _copy_tree(SUBMISSION_INSIDE, cwd)
        path = os.path.join(cwd, KERNEL_CONNECTION_FILE)
        with open(path, "w") as f:
            json.dump(req["connection"], f)
        os.chmod(path, 0o644)
        # all else the server's namespace has, read-only: no other place to leave a file in
        isolation.read_only_but({"/tmp", "/dev/shm", req["stage"], req["ipc"], IPC_INSIDE})

    isolation.private_scratch(int(req["tmp_mb"]), more_mounts=stage, keep_mounts=True)


# Where a kernel's Python, IPython, matplotlib and shells look for start-up and config files
HOME_VARIABLES = ("HOME", "IPYTHONDIR", "MPLCONFIGDIR", "PYTHONUSERBASE", "XDG_CONFIG_HOME", "XDG_CACHE_HOME")


def _check_home(env: dict) -> None:
    """All of them inside the kernel's fresh /tmp (HOME is /tmp: bwrap.inside_environment), so no
    file a kernel before it wrote is read as the next one's configuration."""
    for name in HOME_VARIABLES:
        value = os.path.normpath(env.get(name) or "/tmp")
        if value != "/tmp" and not value.startswith("/tmp/"):
            raise isolation.IsolationError(0, f"{name}={value} is not in the kernel's fresh /tmp")


def _limit_cpu(seconds: int) -> None:
    """The server's other limits (memory, files, processes, ...) pass to the kernel with the fork;
    only the CPU limit is left off the server, which runs for the whole batch."""
    resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds))


def _run_kernel(req: KernelStart, log_fd: int, prefix: Prefix) -> None:
    """PID 1 of the kernel's namespaces, once its folders are ready: its limits, then the kernel."""
    os.chdir(req["cwd"])
    isolation.close_other_fds({log_fd})
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(log_fd)
    _limit_cpu(int(req["cpu_seconds"]))
    os.environ.clear()
    os.environ.update(req["env"])
    random.seed()  # the server's states are every kernel's: not what a fresh kernel has
    numpy.random.seed()
    sys.path.insert(0, req["cwd"])  # as `python -m ipykernel_launcher` has it
    sys.argv = [
        importlib.util.find_spec("ipykernel_launcher").origin,
        *KERNEL_OPTIONS,
        "-f",
        os.path.join(req["cwd"], KERNEL_CONNECTION_FILE),
    ]
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)
    from ipykernel import kernelbase
    from ipykernel.kernelapp import IPKernelApp

    # At shutdown ipykernel signals the processes it finds in /proc as its children, and
    # waits for them. This /proc is the server's namespace's (Linux refuses a new one under
    # bubblewrap's), so it would find the server's and wait in vain; and there is no need:
    # the kernel is PID 1 of its namespace, whose processes all end when it ends.
    kernelbase.Kernel._process_children = lambda self: []
    app = IPKernelApp.instance()
    app.initialize()
    prefix.install(app.shell)
    once_per_cell(app.shell)
    app.start()


READY = b"ok"  # what a kernel says once its folders are ready; anything else is why not


def _kernel_main(req: KernelStart, log_fd: int, ready_w: int, prefix: Prefix) -> int:
    """The kernel: its clean slate first, said on `ready_w` (or why there is none, and no kernel
    runs); then the kernel itself. Its exit code."""
    try:
        _private_folders(req)
    except BaseException as e:  # noqa: BLE001 - the server refuses this kernel, and says why
        why = f"{type(e).__name__}: {e}"[:1000]
        os.write(log_fd, f"warm kernel refused: {why}\n".encode())
        os.write(ready_w, why.encode(errors="replace"))
        return 1
    os.write(ready_w, READY)
    os.close(ready_w)
    try:
        _run_kernel(req, log_fd, prefix)
        return 0
    except BaseException as e:  # noqa: BLE001 - said on the log, then this kernel ends
        os.write(log_fd, f"warm kernel: {type(e).__name__}: {e}\n".encode())
        return 1


def _read_all(fd: int) -> bytes:
    data = b""
    while chunk := os.read(fd, 4096):
        data += chunk
    os.close(fd)
    return data


def _fork_kernel(req: KernelStart, prefix: Prefix) -> tuple[int, int | None, str]:
    """(the kernel's parent, in the server's namespaces; the kernel, PID 1 of its own; READY, or
    why the kernel has no clean slate). The parent's exit status is the kernel's."""
    pid_r, pid_w = os.pipe()
    pid = os.fork()
    if pid:
        os.close(pid_w)
        info = _read_all(pid_r)
        if len(info) < 4:
            return pid, None, "the kernel's parent ended before the kernel was ready"
        why = info[4:].decode(errors="replace") or "the kernel ended before its folders were ready"
        return pid, struct.unpack(">i", info[:4])[0], why
    code = 1
    try:
        os.setsid()
        log_fd = os.dup(2)
        isolation.close_other_fds({log_fd, pid_w})
        isolation.new_namespaces()
        ready_r, ready_w = os.pipe()
        kernel = os.fork()
        if kernel == 0:
            code = 1
            try:
                os.close(pid_w)
                os.close(ready_r)
                code = _kernel_main(req, log_fd, ready_w, prefix)
            finally:
                real_exit(code)
        os.close(log_fd)
        os.close(ready_w)
        os.write(pid_w, struct.pack(">i", kernel) + _read_all(ready_r))
        os.close(pid_w)
        _, status = os.waitpid(kernel, 0)
        code = 128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    finally:
        real_exit(code)


def _kill(pids) -> None:
    for pid in pids or ():
        try:
            os.kill(pid, signal.SIGKILL)  # the kernel is its namespace's PID 1: all it started dies too
        except (ProcessLookupError, TypeError):
            pass


def _reap(child: tuple | None, say) -> tuple | None:
    """The kernel's parent, once it has exited: its status is the kernel's."""
    if child is None:
        return None
    done, status = os.waitpid(child[0], os.WNOHANG)
    if not done:
        return child
    _kill(child)  # a kernel whose parent was killed is not left behind
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)
    say(exited=code, pid=child[0])
    return None


def _handle(req: dict, child: tuple | None, say, prefix: Prefix) -> tuple | None:
    if "kill" in req:
        _kill(child)
    elif "start" in req and child is None:
        # nothing of the kernels before is cleaned up for this one: it gets fresh folders
        # (_private_folders) or does not run (and the grading process starts its kernel cold)
        pid, kernel, why = _fork_kernel(req["start"], prefix)
        if why == READY.decode():
            say(started=pid)
            return pid, kernel
        _kill((pid, kernel))
        os.waitpid(pid, 0)
        say(refused=why)
    return child


def _first_line() -> bytes:
    """Unbuffered, so that nothing after it is taken from the pipe the loop below reads."""
    line = bytearray()
    while not line.endswith(b"\n"):
        byte = os.read(0, 1)
        if not byte:
            break
        line += byte
    return bytes(line)


def serve() -> int:
    isolation.not_dumpable()
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # what an import prints goes to the log, not into the protocol
    say = lambda **msg: proto.write(json.dumps(msg) + "\n")  # noqa: E731
    hello = json.loads(_first_line())
    os.chdir(hello["data_dir"])
    import_ahead()
    prefix = Prefix(hello["prefix"])
    prefix.run()
    os.chdir("/")
    collector.started()  # start-up's objects never collected in a kernel: no copy-on-write of their pages
    isolation.probe_own_proc()  # a kernel mounts a /proc of its own only where Linux allows it
    # fork needs a single-threaded parent: the host refuses a server that says otherwise
    skippable = prefix.skippable if prefix.sources else []  # which first cells a kernel need not run
    say(ready=True, threads=len(os.listdir("/proc/self/task")), skippable=skippable)
    child, buf = None, b""
    while True:
        ready, _, _ = select.select([0], [], [], 0.05)
        child = _reap(child, say)
        if not ready:
            continue
        chunk = os.read(0, 1 << 16)
        if not chunk:  # the grading process is gone: so is everything of ours
            _kill(child)
            return 0
        *lines, buf = (buf + chunk).split(b"\n")
        for line in lines:
            child = _handle(json.loads(line), child, say, prefix)


if __name__ == "__main__":
    sys.exit(serve())
