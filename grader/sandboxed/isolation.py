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
  capabilities are dropped, so it cannot unmount them to reach what is underneath.
"""

from __future__ import annotations

import ctypes
import os

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND, MS_REC, MS_PRIVATE = 0x2, 0x4, 0x8, 0x1000, 0x4000, 0x40000
PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 4, 24, 38
_CAP_VERSION_3 = 0x20080522

_libc = ctypes.CDLL(None, use_errno=True)


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


def private_scratch(tmp_mb: int, more_mounts=None, *, fresh_tmp: bool = True, noexec: bool = False) -> None:
    """In the run (PID 1 of its namespace): private, bounded /tmp and /dev/shm (and what
    `more_mounts()` adds); then no capabilities left, so these mounts stay where they are.
    `fresh_tmp=False` keeps the sandbox's /tmp (the caller empties it), for a process that
    still imports from what the sandbox binds under /tmp (a kit or virtualenv kept there).
    `noexec`: nothing written there can be mapped executable, so a run cannot load native code
    of its own (a .so written from a base64 string), which would be out of every Python check."""
    private_mounts()
    for target in (b"/tmp", b"/dev/shm") if fresh_tmp else (b"/dev/shm",):
        if os.path.isdir(target):
            mount_tmpfs(target, tmp_mb, noexec=noexec)
    if more_mounts:
        more_mounts()
    # a /proc of its own namespace, where the kernel allows it (not under bubblewrap's /proc,
    # whose covered subfolders make Linux refuse a new one): the server's PID is not listed
    _libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
    drop_capabilities()


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
