"""Whose notebook a zip entry is, from the name an LMS gave it (for collect.py), and which LMS
made the zip.

An entry's name has two parts: the prefix the LMS wrote (the student's name and ids) and the
name of the file as the student uploaded it. Only the first may say whose work it is; the
second is the student's own text, so it is never searched for an id:
- Canvas, flat: `<name>_<userid>_<submissionid>_<file>` or `<name>_LATE_<userid>_<submissionid>_<file>`;
  <name> is squashed into one word, so the ids are the leading fields, whatever <file> holds.
- Moodle: `<Full Name>_<participantid>_assignsubmission_<plugin>_/<file>` (a folder per
  participant) or flat `<Full Name>_<participantid>_assignsubmission_<plugin>_<file>`: the id is
  the field before the first `_assignsubmission_` of the path's first component.
An earlier version tried Moodle's pattern first on every entry, greedily: an upload by 111 named
`x_222_assignsubmission_file_backprop_ninja-999999.ipynb` became 222's, in a Moodle zip as in a
Canvas one. Now:
- The LMS is decided once per zip, before any entry is read: an entry votes for an LMS when it
  parses as that LMS's and holds none of the other's marks. A student can add marks to the name
  of their own file but cannot remove the prefix their LMS wrote, so a planted name never votes
  for the other LMS (a Canvas entry keeps its `name_<id>_<id>_`, a Moodle one its
  `_assignsubmission_`). A zip with votes for both is refused whole: it is no LMS's download.
- The student's part of a name may hold no marker of either LMS (`assignsubmission`, or
  `<digits>_<digits>_` as Canvas's ids), and Moodle's own part none beyond its one marker: such an
  entry is refused, out loud, and the rest of the zip is collected as usual.

What a zip says of each student is kept in submitted/lms_students.csv (`Learned`; one row per
student, updated by each collect) for `backprop-ninja report`'s LMS exports: which LMS's id the
student id is (a Canvas user id, or Moodle's participant id, which is per assignment and which
Moodle's grade import cannot match) and the name the LMS wrote (Canvas squashes it, `smithbob`;
Moodle's blind marking writes "Participant" instead: then no name is kept).
"""

from __future__ import annotations

import csv
import os
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

CANVAS, MOODLE = "Canvas", "Moodle"
_STUDENT_ID = re.compile(r"[0-9]{1,20}")
# the ids are the leading fields (<name> has no underscore)
_CANVAS = re.compile(
    r"(?P<name>[^_/]+?)(?P<late>_LATE)?_(?P<id>[^_/]+)_(?P<sub>[^_/]+)_(?P<file>[^/]+)", re.S
)
# the first `_assignsubmission_` of the first component (the lazy name stops there)
_MOODLE = re.compile(
    r"(?P<name>[^/]*?)_(?P<id>[^_/]*)_assignsubmission_(?P<plugin>[a-z]+)(?:_(?P<tail>[^/]*))?(?P<rest>/.*)?",
    re.S,
)
_MOODLE_FOLDER = re.compile(r"\A[^/]*_assignsubmission_[a-z]+_?/", re.S)  # a folder per participant
_CANVAS_MARK = re.compile(r"(?:^|[_/])(?:LATE_)?[0-9]+_[0-9]+_", re.S)
_CANVAS_PREFIX = re.compile(r"[^_/]+(?:_LATE)?_[0-9]+_[0-9]+_", re.S)
_MOODLE_MARK = "assignsubmission"
_NAME_CHARS = 200  # a name longer than this is cut: it only labels a row of an export
_BLIND = "participant"  # Moodle's name for every student under blind marking (in English)
LEARNED = Path("submitted") / "lms_students.csv"  # in the course
_LEARNED_COLUMNS = ["student_id", "lms", "name"]


class Refused(Exception):
    """An entry not taken, and why."""


@dataclass(frozen=True)
class Named:
    lms: str
    student: str
    late: bool
    submission: int  # Canvas's submission id; -1 for Moodle
    file: str  # the student's part of the name: the file as uploaded
    name: str = ""  # the student's name as the LMS wrote it (Canvas: squashed, `smithbob`)


@dataclass(frozen=True)
class Layout:
    lms: str | None  # None: the zip's entries do not say
    why: str


def shown(name: str) -> str:
    name = name if len(name) <= 200 else name[:200] + "..."
    return name if name.isprintable() else repr(name)


def _marked(text: str) -> str | None:
    """The first LMS marker in TEXT (a part of a name the student chose), or None."""
    if _MOODLE_MARK in text.lower():
        return f"Moodle's '{_MOODLE_MARK}'"
    mark = _CANVAS_MARK.search(text)
    return f"Canvas's ids '{mark.group(0).strip('_/')}'" if mark else None


def _fields(name: str, lms: str) -> Named | None:
    """NAME read as LMS would have written it (ids not checked yet), or None if it is not."""
    if lms == CANVAS:
        m = _CANVAS.fullmatch(name)
        return _canvas(m) if m else None
    m = _MOODLE.fullmatch(name)
    if not m:
        return None
    if m["plugin"] != "file":
        raise Refused(f"a Moodle {m['plugin']} submission, not a file")
    file = ((m["tail"] or "") + (m["rest"] or "")).lstrip("/")
    return Named(MOODLE, m["id"], False, -1, file, _moodle_name(m["name"]))


def _moodle_name(prefix: str) -> str:
    """The full name of a Moodle prefix (Moodle wrote its underscores as spaces)."""
    return "" if prefix.strip().lower() == _BLIND else prefix[:_NAME_CHARS]


def _canvas(m: re.Match) -> Named:
    if not m["sub"].isdigit():
        raise Refused(f"Canvas submission id {shown(m['sub'])} is not a number")
    return Named(CANVAS, m["id"], bool(m["late"]), int(m["sub"]), m["file"], m["name"][:_NAME_CHARS])


def parse(name: str, lms: str) -> Named:
    """Whose entry NAME is in an LMS zip; Refused (with the reason) if it cannot be told."""
    named = _fields(name, lms)
    if named is None:
        raise Refused(f"not a {lms} submission name (this zip is {lms}'s)")
    if not _STUDENT_ID.fullmatch(named.student):
        raise Refused(f"{shown(named.student)} is not a valid student id (an LMS user id is digits)")
    folder = name.partition("/")[0] if lms == MOODLE and _MOODLE_FOLDER.search(name) else ""
    if folder.lower().count(_MOODLE_MARK) > 1:
        raise Refused(
            "REFUSED: two Moodle markers in the participant's folder name: whose work it is cannot be told"
        )
    mark = _marked(named.file)
    if mark:
        raise Refused(
            f"REFUSED: the file name the student chose, {shown(named.file)}, holds {mark}: "
            "a name the student chose cannot say whose work it is"
        )
    return named


def _vote(name: str) -> str | None:
    """The LMS this entry's name says made the zip, if it says one."""
    fits = []
    for lms in (CANVAS, MOODLE):
        try:
            parse(name, lms)
            fits.append(lms)
        except Refused:
            pass
    if len(fits) != 1:
        return None
    other_mark = _CANVAS_PREFIX.match(name) if fits[0] == MOODLE else _MOODLE_MARK in name.lower()
    return None if other_mark else fits[0]


def decide(names: list[str]) -> Layout:
    """Canvas or Moodle, for the whole zip, from its entries' names."""
    votes = Counter(v for v in map(_vote, names) if v)
    if votes[CANVAS] and votes[MOODLE]:
        both = f"Canvas ({votes[CANVAS]}) and Moodle ({votes[MOODLE]})"
        return Layout(None, f"holds both {both} names: collect one LMS's zip at a time")
    if not votes:
        return Layout(None, "no entry is named as Canvas or Moodle name submissions")
    ((lms, n),) = votes.items()
    return Layout(lms, f"{lms} zip ({n} of {len(names)} entries named as {lms} names them)")


def parse_undecided(name: str, layout: Layout) -> Named:
    """Refused, always: why NAME is not taken from a zip whose LMS could not be decided."""
    for lms in (MOODLE, CANVAS):
        if _fields(name, lms) is not None:
            parse(name, lms)  # its own reason first (an id that is not digits, ...)
            raise Refused(f"this zip {layout.why}")
    raise Refused("neither a Canvas nor a Moodle submission name")


@dataclass(frozen=True)
class Learned:
    """What an LMS zip said of one student."""

    student: str
    lms: str  # CANVAS: the id is a Canvas user id; MOODLE: a Moodle participant id
    name: str = ""  # as the LMS wrote it in the zip; "" when it wrote none


def read_learned(course: Path) -> dict[str, Learned]:
    """submitted/lms_students.csv, by student id ({} before any collect)."""
    path = Path(course) / LEARNED
    if not path.is_file():
        return {}
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    out = {}
    for row in rows:
        if row.get("student_id") and row.get("lms") in (CANVAS, MOODLE):
            out[row["student_id"]] = Learned(row["student_id"], row["lms"], row.get("name") or "")
    return out


def record_learned(course: Path, learned: list[Learned]) -> Path:
    """Add LEARNED to submitted/lms_students.csv (a student's row from an earlier zip is replaced);
    written to a new file renamed into place, so a link there is replaced, never followed."""
    path = Path(course) / LEARNED
    path.parent.mkdir(exist_ok=True)
    known = read_learned(course) if not path.is_symlink() else {}
    known.update({x.student: x for x in learned})
    tmp = path.with_name(f".{path.name}.writing")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w", newline="", encoding="utf-8") as f:
        out = csv.writer(f)
        out.writerow(_LEARNED_COLUMNS)
        out.writerows([x.student, x.lms, x.name] for x in sorted(known.values(), key=_by_id))
    os.replace(tmp, path)
    return path


def _by_id(x: Learned) -> tuple[int, str]:
    return (len(x.student), x.student)
