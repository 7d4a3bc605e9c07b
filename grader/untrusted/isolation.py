"""Linux primitives that keep one replay run away from the server and from every other run.

The warm replay server and the runs it forks share a user. Same-user processes may
ptrace each other, read each other's /proc/<pid>/fd and steal file descriptors with
pidfd_getfd, unless the target is not dumpable; and a process group is no boundary
(`setsid()` leaves it). So:

- the server makes itself not dumpable (no ptrace, no pidfd_getfd, no /proc/<pid>/fd);
- each run gets a user, PID, mount and IPC namespace of its own: it is PID 1 there, so when it
  ends (or is killed) the kernel kills everything it started, daemons included; it cannot
  name the server's PID at all, and shared memory it leaves dies with it;
- in its mount namespace, /tmp and /dev/shm are fresh size-limited tmpfs, and then all
  capabilities are dropped, so it cannot unmount them to reach what is underneath. Where the
  process still needs what the sandbox mounted under /tmp (a kit or virtualenv kept there, the
  warm kernel's stage and socket folder), those mounts are shown again on the fresh /tmp,
  and nothing else of the old one (fresh_tmp_keeping_mounts).
"""

from __future__ import annotations

import ctypes
import os
import re
import stat

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 0x1, 0x2, 0x4, 0x8, 0x20
MS_BIND, MS_REC, MS_PRIVATE = 0x1000, 0x4000, 0x40000
# A mount's own options as /proc/self/mountinfo shows them, and their flags
_OPTION_FLAGS = {
    "ro": MS_RDONLY,
    "nosuid": MS_NOSUID,
    "nodev": MS_NODEV,
    "noexec": MS_NOEXEC,
    "nosymfollow": 0x100,
    "noatime": 0x400,
    "nodiratime": 0x800,
    "relatime": 0x200000,
}
PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 4, 24, 38
_CAP_VERSION_3 = 0x20080522

_libc = ctypes.CDLL(None, use_errno=True)
# The harness's own os._exit, taken at this module's import (before any student code runs): the
# servers end their forks with it, where a run's or a kernel's os._exit may have been replaced.
real_exit = os._exit


class IsolationError(OSError):
    pass


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise IsolationError(err, f"{what}: {os.strerror(err)}")


def not_dumpable() -> None:
    """Same-user processes lose ptrace, pidfd_getfd and /proc/<pid>/{fd,mem,environ} on us."""
    _check(_libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "prctl(PR_SET_DUMPABLE)")


def new_namespaces() -> None:
    """Before forking the run: its children are born into a PID namespace of their own.
    Needs a single-threaded caller (a fresh fork of the server is)."""
    uid, gid = os.geteuid(), os.getegid()
    _check(_libc.unshare(CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC), "unshare")
    # The same ids inside as outside, so files the run writes (in its own /tmp) have an owner.
    # Our /proc/self files are writable only while we are dumpable: briefly, and before the
    # run exists (the caller holds none of the server's pipes by now).
    _check(_libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), "prctl(PR_SET_DUMPABLE)")
    try:
        for name, text in (
            ("setgroups", "deny"),
            ("uid_map", f"{uid} {uid} 1"),
            ("gid_map", f"{gid} {gid} 1"),
        ):
            with open(f"/proc/self/{name}", "w") as f:
                f.write(text)
    finally:
        not_dumpable()


def private_mounts() -> None:
    """Mounts made from here on are this namespace's alone."""
    _check(_libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "mount --make-rprivate /")


def mount_tmpfs(target: str | bytes, size_mb: int, mode: int = 0o1777, *, noexec: bool = False) -> None:
    path = os.fsencode(target)
    opts = f"size={size_mb}m,mode={mode:o}".encode()
    flags = MS_NOSUID | MS_NODEV | (MS_NOEXEC if noexec else 0)
    _check(_libc.mount(b"tmpfs", path, b"tmpfs", flags, opts), f"mount {path!r}")


def bind(source: str, target: str) -> None:
    _check(_libc.mount(os.fsencode(source), os.fsencode(target), None, MS_BIND, None), f"bind {target}")


def _mountinfo() -> list[tuple[str, set[str], str]]:
    """(mount point, the mount's own options: "ro", "nosuid", ...; file system type) of each mount
    of this namespace, in /proc/self/mountinfo's order: each after the one it lies in, and of
    mounts stacked on one point, the top one last."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.rstrip("\n").split(" ")
            point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), fields[4])
            out.append((point, set(fields[5].split(",")), fields[fields.index("-", 6) + 1]))
    return out


def mounts_under(top: str) -> dict[str, set[str]]:
    """Every mount point strictly under `top`, with its (top) mount's options, in that order."""
    prefix = top.rstrip("/") + "/"
    found: dict[str, set[str]] = {}
    for point, options, _ in _mountinfo():
        if point.startswith(prefix):
            found.pop(point, None)
            found[point] = options
    return found


def _remount_read_only(point: str, options: set[str]) -> None:
    """In a user namespace a remount must repeat the flags it cannot clear (nosuid, ...)."""
    flags = MS_REMOUNT | MS_BIND | MS_RDONLY | sum(_OPTION_FLAGS.get(o, 0) for o in options - {"ro"})
    _check(_libc.mount(None, os.fsencode(point), None, flags, None), f"remount {point} read-only")


# Of processes and devices, not of files: writing there changes no file a later process reads
_NOT_FILES = {"proc", "sysfs", "devpts", "devtmpfs", "mqueue", "cgroup", "cgroup2", "bpf"}


def read_only_but(writable: set[str]) -> None:
    """Every mount of this namespace is made read-only where it is not already, except at the
    points in `writable` and those of processes and devices: then what a process writes lands
    only where the caller allows (its own fresh mounts). Where bubblewrap runs without
    root, its root, /dev and /run are its user's, and so writable by what it runs. Call with
    the capabilities still held."""
    writable = {os.path.realpath(p) for p in writable}
    top = {point: (options, kind) for point, options, kind in _mountinfo()}
    for point, (options, kind) in top.items():
        if point not in writable and "ro" not in options and kind not in _NOT_FILES:
            _remount_read_only(point, options)


def within(mounts: dict[str, set[str]], only) -> dict[str, set[str]]:
    """The mounts that hold one of the paths in `only`, or lie inside one (a virtualenv bound at
    /tmp/x/.venv holds sys.prefix; a /tmp/x bound whole holds it too); `only` None: all."""
    if only is None:
        return mounts
    inside = lambda p, q: p == q or p.startswith(q.rstrip("/") + "/")  # noqa: E731
    return {p: o for p, o in mounts.items() if any(inside(p, q) or inside(q, p) for q in only)}


def fresh_tmp_keeping_mounts(size_mb: int, *, noexec: bool = False, only=None) -> None:
    """A fresh size-limited tmpfs on /tmp, as `mount_tmpfs`, on which what the sandbox mounted
    under the old /tmp (a kit or virtualenv kept there, which the process still imports from; a
    folder it shares with the server) is bound again at the same place, read-only where it was.
    Only those mounts come back, never a file or folder of the old /tmp: nothing that an earlier
    process of this user left there. Each is held by an O_PATH descriptor while /tmp is
    covered. Call after private_mounts(), with the capabilities still held. `only`: just the
    mounts that hold those paths (within())."""
    _mount_in_place(only)
    kept = within(mounts_under("/tmp"), only)
    # a mount under another kept one comes back with it (MS_REC)
    tops = [p for p in kept if not any(p.startswith(q + "/") for q in kept)]
    fds = {p: os.open(p, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC) for p in tops}
    try:
        before = os.stat("/tmp").st_dev
        mount_tmpfs(b"/tmp", size_mb, noexec=noexec)
        if os.stat("/tmp").st_dev == before or os.listdir("/tmp"):
            raise IsolationError(0, "mount /tmp: no fresh, empty tmpfs there")
        for point, fd in fds.items():
            _make_mount_point(point, fd)
            source = f"/proc/self/fd/{fd}".encode()
            _check(_libc.mount(source, os.fsencode(point), None, MS_BIND | MS_REC, None), f"bind {point}")
        for point, options in kept.items():
            if "ro" in options:
                _remount_read_only(point, options)
    finally:
        for fd in fds.values():
            os.close(fd)


def _mount_in_place(paths) -> None:
    """A folder of `paths` kept under /tmp on no mount of its own there (a clone or a virtualenv
    in /tmp, where no sandbox bound it: a student's own check, the unconfined mode) becomes a
    read-only mount of itself, so it comes back on the fresh /tmp with the rest."""
    for path in paths or ():
        mounts = mounts_under("/tmp")
        # a sandbox's bind holds it, or lies inside it (the kit's visible parts, under grader/)
        bound = any(path == m or path.startswith(m + "/") or m.startswith(path + "/") for m in mounts)
        if path.startswith("/tmp/") and os.path.isdir(path) and not bound:
            bind(path, path)
            _remount_read_only(path, mounts_under("/tmp")[path])


def _make_mount_point(point: str, fd: int) -> None:
    """A folder (or an empty file, for a file's bind) on the fresh /tmp, with its parents."""
    if stat.S_ISDIR(os.fstat(fd).st_mode):
        os.makedirs(point, mode=0o755, exist_ok=True)
        return
    os.makedirs(os.path.dirname(point), mode=0o755, exist_ok=True)
    os.close(os.open(point, os.O_CREAT | os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644))


def private_scratch(
    tmp_mb: int, more_mounts=None, *, keep_mounts: bool = False, noexec: bool = False, only=None
) -> None:
    """In the run (PID 1 of its namespace): private, bounded /tmp and /dev/shm (and what
    `more_mounts()` adds); then no capabilities left, so these mounts stay where they are.
    `keep_mounts`: what the sandbox mounted under /tmp is shown again on the fresh one
    (fresh_tmp_keeping_mounts), for a process that still imports from there (the warm kernel);
    /tmp must then exist, or there is no clean slate to give; `only`, just the mounts that hold
    those paths (the replay's run keeps its Python installation, not the exchange folder).
    `noexec`: nothing written there can be mapped executable, so a run cannot load native code
    of its own (a .so written from a base64 string), which would be out of every Python check."""
    private_mounts()
    if keep_mounts:
        fresh_tmp_keeping_mounts(tmp_mb, noexec=noexec, only=only)
    for target in (b"/dev/shm",) if keep_mounts else (b"/tmp", b"/dev/shm"):
        if os.path.isdir(target):
            mount_tmpfs(target, tmp_mb, noexec=noexec)
    if more_mounts:
        more_mounts()
    if own_proc is not False:  # a /proc of its own namespace: the server's PID is not listed
        _mount_proc()
    drop_capabilities()


own_proc: bool | None = None  # may a run mount a /proc of its own? None: try (probe_own_proc)


def _mount_proc() -> bool:
    return _libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None) == 0


def probe_own_proc() -> bool:
    """Once, in a warm server before its first fork: whether a run's namespaces may mount a /proc
    of their own. Under bubblewrap's /proc, whose covered subfolders make Linux refuse a new one,
    they never may, and each refusal is a line in the kernel's log ("Mount too revealing"): one
    for the server instead of one for every run and kernel of a class."""
    global own_proc
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            new_namespaces()
            child = os.fork()
            if child == 0:
                mounted = False
                try:
                    private_mounts()
                    mounted = _mount_proc()
                finally:
                    real_exit(0 if mounted else 1)
            code = os.waitstatus_to_exitcode(os.waitpid(child, 0)[1])
        finally:
            real_exit(code)
    own_proc = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
    return own_proc


def drop_capabilities() -> None:
    _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    for cap in range(64):
        _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)  # fails past the last one: harmless
    header = (ctypes.c_uint32 * 2)(_CAP_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable x 2: all zero
    _check(_libc.capset(header, data), "capset")


def close_other_fds(keep: set[int]) -> None:
    """What the run may write to: the fds in `keep` and /dev/null on 0-2. Nothing the server
    holds (its request and answer pipes) is inherited."""
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        if fd not in keep:
            os.dup2(devnull, fd)
    for fd in _open_fds():
        if fd > 2 and fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


def _open_fds() -> list[int]:
    try:
        return sorted(int(x) for x in os.listdir("/proc/self/fd"))
    except OSError:
        return list(range(3, 1024))
