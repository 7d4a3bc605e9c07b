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
grader.course.exchange COURSE` prints those lines. With real student accounts the course
folder must be enterable by them (o+x) and everything else in it closed to them (source/ holds
the solutions). Group-shared exchanges (`CourseDirectory.groupshared`) are left to nbgrader.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

EXCHANGE_FOLDER = "exchange"
DEFAULT_COURSE_ID = "backprop_ninja"  # what nbgrader_config.py sets
ROOT_MODE = 0o1777
COURSE_MODE = 0o755
OUTBOUND_MODE = 0o755
INBOUND_MODE = 0o3733

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
    other) and creates the folders nbgrader expects there."""
    if course_id is not None:
        c.CourseDirectory.course_id = course_id
    course_id = c.CourseDirectory.get("course_id") or ""
    if not course_id:
        raise ValueError("the exchange needs c.CourseDirectory.course_id: set it before configure_exchange")
    root = exchange_root(course_root)
    c.Exchange.root = str(root)
    if not c.CourseDirectory.get("groupshared", False):
        try:
            prepare_exchange(course_root=course_root, course_id=course_id)
        except OSError as e:  # e.g. a read-only copy of the course on a grading worker
            log.warning("could not prepare the exchange %s: %s", root, e)
    return root


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
            "usage: python -m grader.course.exchange COURSE\n"
            "prints the nbgrader_config.py lines students need to reach COURSE's exchange",
            file=sys.stderr,
        )
        return 2
    print(student_config(course_root=argv[0]), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
