"""What `nbgrader collect` may take from the exchange's inbound/ folder (SafeCollect, exchange.py).

nbgrader 0.9.6 takes a submission's student id and time from its folder's name
(`<student>+<assignment>+<timestamp>+<random>`) and keeps each student's latest. inbound/ lets
any account create a folder there (mode 2733, 3733 here), so alice could create
`bob+backprop_ninja+2099-01-01 00:00:00.000000 UTC+x` and `collect --update` made it bob's work:
an owner who is not the student is only a warning. A name that is not `a+b+c` stopped the whole
collect, and so did one folder over `CourseDirectory.max_dir_size`.

The design: a collect that trusts only the owner, rather than per-student inbound folders.
Students submit with stock nbgrader, and the kernel records who made each folder and each file
in it; per-student folders would need root to make one for each student and a submit of ours
on every student's side. What holds, students being separate Unix accounts on one machine:
- A folder counts for the student its name says only if that account owns it, and every file
  and folder inside (no link, no other kind of file): alice's folder in bob's name is refused,
  and so is bob's folder if anything in it is someone else's (it is copied by file descriptor,
  following no link, so nothing can be swapped in while it is read). The submission is then
  bob's previous one.
- A time in a name later than now, or than when the folder was made (its change time, which no
  student can set), is refused. The time kept is the one in the name unless the folder's files
  changed later than that (by more than BACKDATE_SLACK): then it is when they last changed, so a
  late submission cannot claim an earlier time. timestamp.txt in submitted/ is the time kept,
  not the student's own file.
- Only a student's latest MAX_PER_STUDENT folders are looked at, oldest ones not; a flood in
  other names costs one stat each and a few lines of the log, never a read.
- Nobody else can delete or rename a student's folder (the sticky bit) or list inbound/. Reading
  or emptying a submission needs its name, which holds 72 random bits (nbgrader's default
  `ExchangeSubmit.add_random_string`): that is what keeps it private, as in nbgrader.
Filling the disk is for a quota on the exchange's filesystem: nothing in the exchange limits it.
An exchange copied elsewhere gets new change times: its submissions would be as late as the copy.
"""

from __future__ import annotations

import errno
import os
import pwd
import stat
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

from nbgrader.utils import parse_utc

from ..settings import MAX_DEPTH, MAX_FILES, MAX_PER_STUDENT

FUTURE_SLACK = timedelta(minutes=5)  # clocks of several machines sharing the exchange
BACKDATE_SLACK = timedelta(minutes=15)  # nbgrader names a folder before it copies the files
_CHUNK = 2**16
_OPEN = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class Refused(Exception):
    """A submission folder not taken, and why."""


@dataclass(frozen=True)
class Folder:
    name: str
    student: str  # the id its name claims
    stamp: str  # the time written in its name
    when: datetime | None  # that time in UTC (nbgrader's parse_utc); None: not a time
    uid: int
    owner: str  # the account owning it, or "uid N"
    made: datetime  # its change time, UTC: when it was made or last changed
    is_dir: bool


@dataclass(frozen=True)
class Refusal:
    name: str
    owner: str
    kind: str  # for the log's counts: "in another's name", "in the future", ...
    reason: str


@dataclass
class Plan:
    tries: dict[str, list[Folder]] = field(default_factory=dict)  # per student, in the order to try
    refused: list[Refusal] = field(default_factory=list)


def account(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def utc(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, timezone.utc).replace(tzinfo=None)


def _when(stamp: str) -> datetime | None:
    try:
        return parse_utc(stamp)
    except (ValueError, OverflowError, TypeError, AttributeError):
        return None


def read_inbound(inbound_fd: int, assignment: str, student: str | None = None) -> list[Folder]:
    """The entries of inbound/ named for ASSIGNMENT (and STUDENT, if given), as nbgrader reads
    a name; nothing inside them is opened."""
    folders, owners = [], {}  # one look-up per owner, however many folders (none kept after)
    with os.scandir(inbound_fd) as entries:
        for entry in entries:
            fields = entry.name.rsplit("+", 3)
            if len(fields) < 3 or fields[1] != assignment or (student and fields[0] != student):
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except FileNotFoundError:  # removed since it was listed
                continue
            name, stamp, uid = entry.name, fields[2], st.st_uid
            owner = owners[uid] if uid in owners else owners.setdefault(uid, account(uid))
            made, is_dir = utc(st.st_ctime), stat.S_ISDIR(st.st_mode)
            folders.append(Folder(name, fields[0], stamp, _when(stamp), uid, owner, made, is_dir))
    return folders


def _judge(f: Folder, now: datetime, check_owner: bool) -> tuple[str, str] | None:
    """(kind, reason) if F cannot be a submission, whatever it holds."""
    if not f.is_dir:
        return "not a folder", "not a folder"
    if not f.student or f.student.startswith("."):
        return "not a student id", f"{f.student!r} is not a student id"
    if check_owner and f.owner != f.student:
        return "in another's name", f"named for {f.student} but made by {f.owner}"
    if f.when is None:
        return "not a time", f"{f.stamp!r} is not a time"
    if f.when > now + FUTURE_SLACK:
        return "in the future", f"dated {f.when:%Y-%m-%d %H:%M:%S} UTC, in the future"
    if f.when > f.made + FUTURE_SLACK:
        made = f"{f.made:%Y-%m-%d %H:%M:%S}"
        return (
            "after it was made",
            f"dated {f.when:%Y-%m-%d %H:%M:%S} UTC, after its folder was made ({made})",
        )
    return None


def plan(
    folders: list[Folder],
    *,
    now: datetime,
    duedate: datetime | None = None,
    before_duedate: bool = False,
    check_owner: bool = True,
    per_student: int = MAX_PER_STUDENT,
) -> Plan:
    """Which folders may be each student's submission, latest first (those before the due date
    first with BEFORE_DUEDATE, as nbgrader's --before-duedate), and which are refused."""
    result, fine = Plan(), defaultdict(list)
    for f in folders:
        judged = _judge(f, now, check_owner)
        if judged:
            result.refused.append(Refusal(f.name, f.owner, *judged))
        else:
            fine[f.student].append(f)
    for student in sorted(fine):
        latest = sorted(fine[student], key=lambda f: (f.when, f.name), reverse=True)
        for f in latest[per_student:]:
            why = f"not looked at: older than {student}'s latest {per_student}"
            result.refused.append(Refusal(f.name, f.owner, "not looked at", why))
        tries = latest[:per_student]
        if before_duedate and duedate is not None:
            tries = [f for f in tries if f.when <= duedate] + [f for f in tries if f.when > duedate]
        result.tries[student] = tries
    return result


def summarise(refused: list[Refusal]) -> list[str]:
    """The log's lines about REFUSED: one per owner and kind of refusal, a flood of folders
    included, with its count and the latest-dated folder as the example."""
    groups: dict[tuple[str, str], list[Refusal]] = defaultdict(list)
    for r in refused:
        groups[r.owner, r.kind].append(r)
    lines = []
    for (owner, _), group in sorted(groups.items()):
        r = max(group, key=lambda r: r.name.rsplit("+", 3)[2:3])  # the latest-dated, roughly
        line = f"REFUSED inbound/{r.name!r} (owner {owner}): {r.reason}"
        lines.append(
            line if len(group) == 1 else f"{line}; and {len(group) - 1} more such folders of {owner}"
        )
    return lines


@dataclass
class _Budget:
    max_bytes: int
    max_files: int
    bytes: int = 0
    files: int = 0


def _open(dir_fd: int, name: str, path: str) -> int:
    try:
        return os.open(name, _OPEN, dir_fd=dir_fd)
    except OSError as e:
        raise Refused(f"{path}: a link" if e.errno == errno.ELOOP else f"{path}: {e.strerror}") from None


def _checked(fd: int, path: str, uid: int) -> os.stat_result:
    st = os.fstat(fd)
    if st.st_uid != uid:
        raise Refused(f"{path} belongs to {account(st.st_uid)}, not to {account(uid)}")
    if not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)):
        raise Refused(f"{path}: neither a file nor a folder")
    return st


def _copy_file(fd: int, dest: Path, path: str, budget: _Budget) -> None:
    out = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    with os.fdopen(out, "wb") as f:
        while chunk := os.read(fd, _CHUNK):
            budget.bytes += len(chunk)
            if budget.bytes > budget.max_bytes:
                raise Refused(f"more than {budget.max_bytes} bytes (CourseDirectory.max_dir_size), at {path}")
            f.write(chunk)


def _copy_dir(fd: int, dest: Path, path: str, uid: int, budget: _Budget, depth: int) -> float:
    """Copy the folder open at FD into DEST; the latest change time of what was read."""
    dest.mkdir(mode=0o755)
    latest = 0.0
    for name in sorted(os.listdir(fd)):
        budget.files += 1
        if budget.files > budget.max_files:
            raise Refused(f"more than {budget.max_files} files and folders")
        child_path = f"{path}/{name}" if path else name
        child = _open(fd, name, child_path)
        try:
            st = _checked(child, child_path, uid)
            if stat.S_ISDIR(st.st_mode):
                if depth >= MAX_DEPTH:
                    raise Refused(f"folders more than {MAX_DEPTH} deep")
                latest = max(latest, _copy_dir(child, dest / name, child_path, uid, budget, depth + 1))
            else:
                _copy_file(child, dest / name, child_path, budget)
            latest = max(latest, os.fstat(child).st_ctime)  # after reading: a change while read counts
        finally:
            os.close(child)
    return max(latest, os.fstat(fd).st_ctime)


def copy_owned(
    inbound_fd: int, folder: Folder, dest: Path, *, max_bytes: int, max_files: int = MAX_FILES
) -> datetime:
    """Copy FOLDER (an entry of the inbound/ open at INBOUND_FD) to DEST, a new path, if it and
    everything in it are regular files and folders of its owner; the time it last changed.
    Refused otherwise (DEST may then hold part of it)."""
    fd = _open(inbound_fd, folder.name, folder.name)
    try:
        _checked(fd, folder.name, folder.uid)
        return utc(_copy_dir(fd, dest, "", folder.uid, _Budget(max_bytes, max_files), 0))
    finally:
        os.close(fd)


def time_kept(folder: Folder, changed: datetime) -> tuple[datetime, str]:
    """The submission's time: its name's, or when its files last changed if that is later by
    more than BACKDATE_SLACK; and a note when it is the latter."""
    if folder.when is not None and changed > folder.when + BACKDATE_SLACK:
        return changed, (
            f"inbound/{folder.name!r} says {folder.when:%Y-%m-%d %H:%M:%S} UTC but its files changed at "
            f"{changed:%Y-%m-%d %H:%M:%S} UTC: the latter is its time"
        )
    return folder.when, ""
