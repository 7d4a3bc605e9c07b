"""nbgrader's exchange inside the course folder, so that `nbgrader release_assignment`,
`fetch_assignment`, `submit`, `collect` and the formgrader's Release and Collect buttons work on
one machine without an administrator creating /usr/local/share/nbgrader/exchange first.

What nbgrader 0.9.6 requires (nbgrader/exchange/default/):
- `Exchange.root` defaults to /usr/local/share/nbgrader/exchange, "MUST be preexisting": every
  exchange command but release fails unless it is a folder the user may write and enter
  (`Exchange.ensure_root`). Release creates it if missing, and chmods it to 0777 when its
  permission bits (`& 0o777`) differ, so a sticky bit on top (0o1777) is kept.
- Release makes <root>/<course_id>/ and outbound/ 0755 and inbound/ 2733 (students may drop a
  submission there but not list the others) when missing, and fails on existing ones the
  instructor does not own (`ensure_directory`, unless `CourseDirectory.groupshared`).
- The formgrader looks at the exchange once, when it starts (nbgrader.apps.api lists it): if
  the root is missing then, its Release and Collect buttons stay off. Hence the folders are
  made here, while the course's config is read, and not left to the first release.
- A student's id is `--student` (`CourseDirectory.student_id`) or else the OS account of the
  process (`pwd.getpwuid(os.getuid())`; $USER and $LOGNAME are not consulted).

Made here, when missing: the root 0o1777 (world-writable as nbgrader wants, sticky as /tmp is,
so no account can rename or delete what another put there, such as the course's own folder),
<course_id>/ and outbound/ 0755, inbound/ 0o3733 (nbgrader's 2733 plus sticky: a student
cannot remove another's submission even knowing its name). When the config is read as root,
the folders are given to the course folder's owner, who runs release and collect.

Students on the same machine need the root and the course id in their own config (their
~/.jupyter/nbgrader_config.py or /etc/jupyter/nbgrader_config.py): `python -m
grader.incoming.exchange COURSE` prints those lines. With real student accounts the course
folder must be enterable by them (o+x) and everything else in it closed to them (source/ holds
the solutions). Group-shared exchanges (`CourseDirectory.groupshared`) are left to nbgrader.

Collecting: nbgrader's collect believes a folder's name, so any account could submit in any
student's name. `configure_exchange` makes SafeCollect (below) the exchange's collect
(`ExchangeFactory.collect`), which both `nbgrader collect` and the formgrader's Collect button
build (nbgrader.apps.api.NbGraderAPI.collect): a folder counts only for the account that owns
it and everything in it, dated no later than now and than when it was made, and only each
student's latest folders are looked at. Why a collect that trusts only the owner rather than
per-student inbound folders, and what that guarantees: inbound.py.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.exchange.default.collect import ExchangeCollect
from traitlets import Integer

from ..settings import MAX_PER_STUDENT
from . import inbound

EXCHANGE_FOLDER = "exchange"
DEFAULT_COURSE_ID = "backprop_ninja"  # what nbgrader_config.py sets
ROOT_MODE = 0o1777
COURSE_MODE = 0o755
OUTBOUND_MODE = 0o755
INBOUND_MODE = 0o3733
SAFE_COLLECT = "grader.incoming.exchange.SafeCollect"
NO_OWNER_CHECK = (
    "ExchangeCollect.check_owner is off: a folder in inbound/ counts for the student its name says, "
    "whoever made it, so any account can submit in any student's name (only for one account playing "
    "several students)"
)

log = logging.getLogger(__name__)


def exchange_root(course_root: str | os.PathLike) -> Path:
    return Path(course_root).resolve() / EXCHANGE_FOLDER


def _make(path: Path, mode: int, owner: os.stat_result | None) -> None:
    if path.is_dir() or path.is_symlink():
        return  # nbgrader itself checks what exists (owner, permissions)
    path.mkdir()
    if owner is not None:
        os.chown(path, owner.st_uid, owner.st_gid)
    os.chmod(path, mode)  # mkdir's mode goes through the umask, and drops the sticky bit


def prepare_exchange(*, course_root: str | os.PathLike, course_id: str) -> Path:
    """Create the course-local exchange (only what is missing); returns its root."""
    root = exchange_root(course_root)
    course_stat = os.stat(course_root)
    owner = course_stat if os.geteuid() == 0 and course_stat.st_uid != 0 else None
    _make(root, ROOT_MODE, owner)
    course = root / course_id
    _make(course, COURSE_MODE, owner)
    _make(course / "outbound", OUTBOUND_MODE, owner)
    _make(course / "inbound", INBOUND_MODE, owner)
    return root


def configure_exchange(c, *, course_root: str | os.PathLike, course_id: str | None = None) -> Path:
    """For nbgrader_config.py: `configure_exchange(c, course_root=HERE)` sets `Exchange.root` to
    <course>/exchange (and `CourseDirectory.course_id` if given; it must be set one way or the
    other), makes SafeCollect the exchange's collect, and creates the folders nbgrader expects."""
    if course_id is not None:
        c.CourseDirectory.course_id = course_id
    course_id = c.CourseDirectory.get("course_id") or ""
    if not course_id:
        raise ValueError("the exchange needs c.CourseDirectory.course_id: set it before configure_exchange")
    root = exchange_root(course_root)
    c.Exchange.root = str(root)
    c.ExchangeFactory.collect = SAFE_COLLECT
    if not c.CourseDirectory.get("groupshared", False):
        try:
            prepare_exchange(course_root=course_root, course_id=course_id)
        except OSError as e:  # e.g. a read-only copy of the course on a grading worker
            log.warning("could not prepare the exchange %s: %s", root, e)
    return root


class SafeCollect(ExchangeCollect):
    """nbgrader's collect taking from inbound/ only what the student named made (inbound.py).
    Its options are ExchangeCollect's (--update, --before-duedate, check_owner) and one more."""

    max_per_student = Integer(
        MAX_PER_STUDENT, help="How many of a student's latest folders in inbound/ are looked at."
    ).tag(config=True)

    def init_src(self):
        if self.coursedir.course_id == "":
            self.fail("No course id specified. Re-run with --course flag.")
        self.inbound_path = os.path.join(self.root, self.coursedir.course_id, "inbound")
        if not os.path.isdir(self.inbound_path):
            self.fail(f"Course not found: {self.inbound_path}")
        try:
            self.inbound_fd = os.open(self.inbound_path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            self.fail(f"You don't have read permissions for the directory: {self.inbound_path}")
        student = self.coursedir.student_id if self.coursedir.student_id not in ("", "*") else None
        folders = inbound.read_inbound(self.inbound_fd, self.coursedir.assignment_id, student)
        with Gradebook(self.coursedir.db_url, self.coursedir.course_id) as gb:
            try:
                self.duedate = gb.find_assignment(self.coursedir.assignment_id).duedate
            except MissingEntry:
                self.duedate = None
        self.plan = inbound.plan(
            folders,
            now=datetime.now(timezone.utc).replace(tzinfo=None),
            duedate=self.duedate,
            before_duedate=self.before_duedate,
            check_owner=self.check_owner,
            per_student=self.max_per_student,
        )
        self.src_records = []  # nbgrader's; this collect goes by self.plan

    def copy_files(self):
        try:
            if not self.check_owner:
                self.log.warning(NO_OWNER_CHECK)
            for line in inbound.summarise(self.plan.refused):
                self.log.error(line)
            what = f"of '{self.coursedir.assignment_id}' for course '{self.coursedir.course_id}'"
            if not self.plan.tries:
                self.log.warning(f"No submissions {what} to collect")
            else:
                self.log.info(f"Processing {len(self.plan.tries)} submissions {what}")
            for student in sorted(self.plan.tries):
                self._collect(student, self.plan.tries[student])
        finally:
            os.close(self.inbound_fd)

    def _wanted(self, folder: inbound.Folder, dest: str) -> bool:
        """nbgrader's rule: a new submission always, a newer one with --update, another with
        --before-duedate."""
        if not os.path.isdir(dest):
            return True
        existing = self.coursedir.get_existing_timestamp(dest)
        if self.update and (existing is None or folder.when > existing):
            return True
        return self.before_duedate and existing != folder.when

    def _collect(self, student: str, tries: list[inbound.Folder]) -> None:
        """The first of TRIES (latest first) that copies whole, into submitted/."""
        assignment = self.coursedir.assignment_id
        dest = self.coursedir.format_path(self.coursedir.submitted_directory, student, assignment)
        for folder in tries:
            if not self._wanted(folder, dest):
                done = (
                    "No newer submission to collect"
                    if self.update
                    else "Submission already exists, use --update to update"
                )
                self.log.info(f"{done}: {student} {assignment}")
                return
            with tempfile.TemporaryDirectory(prefix=".collect-", dir=self.coursedir.root) as staging:
                copy = Path(staging) / "submission"
                try:
                    changed = inbound.copy_owned(
                        self.inbound_fd, folder, copy, max_bytes=1000 * self.coursedir.max_dir_size
                    )
                except inbound.Refused as e:
                    self.log.error(f"REFUSED inbound/{folder.name!r} (owner {folder.owner}): {e}")
                    continue
                when, note = inbound.time_kept(folder, changed)
                if note:
                    self.log.warning(note)
                stamp = (
                    folder.stamp
                    if when == folder.when
                    else when.replace(tzinfo=timezone.utc).strftime(self.timestamp_format)
                )
                self._put(student, copy, dest, stamp)
            return
        kept = "submitted/ keeps the submission it had" if os.path.isdir(dest) else "nothing collected"
        self.log.error(f"{student}: every folder looked at was refused; {kept}")

    def _put(self, student: str, copy: Path, dest: str, stamp: str) -> None:
        if os.path.isdir(dest):
            self.log.info(f"Updating submission: {student} {self.coursedir.assignment_id}")
            shutil.rmtree(dest)
        else:
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            self.log.info(f"Collecting submission: {student} {self.coursedir.assignment_id}")
        self.do_copy(str(copy), dest)
        with open(os.path.join(dest, "timestamp.txt"), "w") as fh:
            fh.write(stamp)  # the time collect kept, not the student's own timestamp.txt


def student_config(*, course_root: str | os.PathLike, course_id: str = DEFAULT_COURSE_ID) -> str:
    """A nbgrader_config.py for the students of this course on the same machine."""
    return (
        "c = get_config()  # noqa: F821\n"
        f"c.Exchange.root = {str(exchange_root(course_root))!r}\n"
        f"c.CourseDirectory.course_id = {course_id!r}\n"
    )


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0].startswith("-"):
        print(
            "usage: python -m grader.incoming.exchange COURSE\n"
            "prints the nbgrader_config.py lines students need to reach COURSE's exchange",
            file=sys.stderr,
        )
        return 2
    print(student_config(course_root=argv[0]), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
