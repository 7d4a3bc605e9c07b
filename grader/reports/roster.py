"""Who each student of the gradebook is in the LMS, for the LMS exports (exports.py).

A gradebook's student id is whatever put the notebook in submitted/: `backprop-ninja collect`
writes the id the LMS wrote in its zip (a Canvas user id, or a Moodle participant id, which is
per assignment and which Moodle's grade import cannot match), and says so in
submitted/lms_students.csv with the name the LMS wrote (incoming/lms_names.py); any other id is
the course's own (a JupyterHub user name, a student number). What an import needs beyond it
comes from the roster the instructor gives, `backprop-ninja report --roster FILE`, a CSV the LMS
itself exports (English headers, comma, semicolon or tab separated):
- Moodle's grading worksheet of the assignment (View all submissions > Download grading
  worksheet, with the "Offline grading worksheet" feedback type on): "Identifier"
  (`Participant 1234`: the same participant ids as the zip), "Full name", and the site's
  identity fields ("Email address", "ID number", ...);
- Moodle's grade export (Export > Plain text file) or participants' download: "First name",
  "Last name", "ID number", "Email address", "Username"; an admin's bulk user download:
  "id" (the Moodle user id), "username", "email", "idnumber", "firstname", "lastname";
- Canvas's gradebook export: "Student" ("Last, First"), "ID" (the Canvas user id), "SIS User ID",
  "SIS Login ID", "Section"; its "Points Possible" row is skipped.
A student is that roster row whose identifier equals their id: the participant id for a student
collected from a Moodle zip, the Canvas ID for one from a Canvas zip, any identifier otherwise.
An id that fits two rows fits none, and the report says so.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..incoming.lms_names import CANVAS, MOODLE, Learned

CANVAS_IDS = ["ID", "SIS User ID", "SIS Login ID"]  # what Canvas's import matches a row on
# what Moodle's "Import grades > CSV file" matches a user on, with its "Map to" name
MOODLE_IDS = {
    "ID number": "useridnumber",
    "Email address": "useremail",
    "Username": "username",
    "User id": "userid",
}
CANVAS_USER_ID, PARTICIPANT_ID = "Canvas user id", "Moodle participant id"
_HEADERS = {
    "student": "name",
    "full name": "name",
    "fullname": "name",
    "first name": "first",
    "firstname": "first",
    "last name": "last",
    "lastname": "last",
    "surname": "last",
    "identifier": "participant",
    "section": "section",
    "sis user id": "SIS User ID",
    "sis login id": "SIS Login ID",
    "email address": "Email address",
    "email": "Email address",
    "id number": "ID number",
    "idnumber": "ID number",
    "username": "Username",
    "id": "id",  # Canvas's user id in Canvas's export; Moodle's user id in Moodle's bulk download
}
_TRAILING_DIGITS = re.compile(r"([0-9]+)\s*\Z")


class RosterError(ValueError):
    """A roster that cannot be read, and why."""


@dataclass
class Person:
    """One roster row: what the LMS knows of one student."""

    name: str = ""
    section: str = ""
    participant: str = ""  # Moodle's participant id in the assignment
    canvas: dict[str, str] = field(default_factory=dict)  # CANVAS_IDS -> value
    moodle: dict[str, str] = field(default_factory=dict)  # MOODLE_IDS -> value

    def keys(self) -> dict[str, str]:
        """Every identifier of the row, by kind."""
        return {"participant": self.participant, **self.canvas, **self.moodle}


@dataclass
class Roster:
    path: Path
    kind: str  # which LMS export it was read as
    people: list[Person]
    has: set[str] = field(default_factory=set)  # the identifier columns it has (Person.keys()'s kinds)


def _delimiter(first_line: str) -> str:
    return max([",", ";", "\t"], key=first_line.count)


def _kind(headers: list[str]) -> str:
    if "student" in headers and "id" in headers:
        return "Canvas gradebook export"
    return "Moodle grading worksheet" if "identifier" in headers else "Moodle export"


def _person(cells: dict[str, str], canvas: bool) -> Person | None:
    """One row's Person (cells: recognised header -> value), None for a row naming no one."""
    get = lambda key: cells.get(key, "").strip()
    first, last = get("first"), get("last")
    name = get("name") or ", ".join(p for p in (last, first) if p)
    if canvas and "Points Possible" in name:
        return None
    participant = _TRAILING_DIGITS.search(get("participant"))
    person = Person(name, get("section"), participant.group(1) if participant else "")
    for column in CANVAS_IDS:
        person.canvas[column] = get(column)
    for column in MOODLE_IDS:
        person.moodle[column] = get(column)
    if canvas:
        person.canvas["ID"] = get("id")
    else:
        person.moodle["User id"] = get("id")
    person.canvas = {k: v for k, v in person.canvas.items() if v}
    person.moodle = {k: v for k, v in person.moodle.items() if v}
    return person if any(person.keys().values()) else None


def read_roster(path: Path) -> Roster:
    """A CSV the LMS exported; RosterError if it holds no identifier this module knows."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as e:
        raise RosterError(f"{path} could not be read as a UTF-8 CSV file: {e}") from e
    # a newline inside a quoted cell (a feedback comment) stays in its cell
    rows = list(csv.reader(io.StringIO(text, newline=""), delimiter=_delimiter(text.partition("\n")[0])))
    headers = [h.strip().lower() for h in rows[0]] if rows else []
    kind = _kind(headers)
    canvas = kind.startswith("Canvas")
    columns = {i: _HEADERS[h] for i, h in enumerate(headers) if h in _HEADERS}
    ids = set(columns.values()) & {"participant", "id", *CANVAS_IDS, *MOODLE_IDS}
    if not ids:
        raise RosterError(
            f"{path} has none of the columns an LMS export identifies students by (Moodle: Identifier, "
            "ID number, Email address, Username, id; Canvas: ID, SIS User ID, SIS Login ID)"
        )
    people = []
    for row in rows[1:]:
        person = _person({key: row[i] for i, key in columns.items() if i < len(row)}, canvas)
        people += [person] if person else []
    has = {("ID" if canvas else "User id") if k == "id" else k for k in ids}
    return Roster(path, kind, people, has)


@dataclass
class Identity:
    """What the LMS exports write of one student besides the grade."""

    student: str
    name: str = ""  # never the id: "" when no name is known
    section: str = ""
    canvas: dict[str, str] = field(default_factory=dict)  # CANVAS_IDS known
    moodle: dict[str, str] = field(default_factory=dict)  # MOODLE_IDS known
    id_is: str = ""  # CANVAS_USER_ID or PARTICIPANT_ID when collect said so; "" the course's own
    in_roster: str = ""  # "found", "not found", "fits N rows", or "" without a roster
    assumed: str = ""  # the MOODLE_IDS field the id is taken as, when nothing says what it is

    def why_not(self, identifier: str) -> str:
        """Why this student has no `identifier` that Moodle's import can match."""
        if self.in_roster.startswith("fits"):
            return "each id fits several rows of the roster"
        if self.in_roster == "found":
            return f"the roster has no {identifier} for them"
        either = " (nor in the roster)" if self.in_roster else ""
        if self.id_is == PARTICIPANT_ID:
            return f"their ids are Moodle participant ids (from the zip), which Moodle cannot match{either}"
        if self.id_is:
            return f"their ids are {self.id_is}s (from the zip), not Moodle's{either}"
        return "not in the roster" if self.in_roster else f"no {identifier}"


@dataclass
class Directory:
    """The roster (if any) and what collect learned, asked one student at a time."""

    roster: Roster | None = None
    learned: dict[str, Learned] = field(default_factory=dict)
    canvas_id_column: str = "ID"  # where a course's own ids go in canvas.csv
    moodle_id_column: str = "ID number"  # what a course's own ids are to Moodle
    _index: dict[tuple[str, str], list[Person]] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.canvas_id_column not in CANVAS_IDS:
            raise ValueError(f"canvas_id_column must be one of {CANVAS_IDS}, not {self.canvas_id_column!r}")
        if self.moodle_id_column not in MOODLE_IDS:
            raise ValueError(
                f"moodle_id_column must be one of {list(MOODLE_IDS)}, not {self.moodle_id_column!r}"
            )
        for person in self.roster.people if self.roster else []:
            for kind, value in person.keys().items():
                if value:
                    self._index.setdefault((kind, _folded(kind, value)), []).append(person)

    def _find(self, student: str, kinds: list[str]) -> tuple[Person | None, str]:
        if self.roster is None:
            return None, ""
        found = {id(p): p for k in kinds for p in self._index.get((k, _folded(k, student)), [])}
        if len(found) > 1:
            return None, f"fits {len(found)} rows"
        return (next(iter(found.values())), "found") if found else (None, "not found")

    def _may_be(self, kind: str, in_roster: str) -> bool:
        """Whether an id the roster did not give may still be taken as `kind`: not if it fits
        several rows, nor if the roster has that column and the id is not in it (Moodle's
        import stops at a user it cannot find)."""
        return not in_roster.startswith("fits") and (self.roster is None or kind not in self.roster.has)

    def summary(self, students: list[str]) -> list[str]:
        """How the roster fitted the gradebook's students."""
        if self.roster is None:
            return []
        fit = {s: self.identify(s).in_roster for s in students}
        rows, found = len(self.roster.people), sum(fit[s] == "found" for s in students)
        read = f"read as {self.roster.kind}, {rows} row{'' if rows == 1 else 's'}"
        line = f"roster {self.roster.path.name} ({read}): {found} of {n_students(len(students))} found"
        others = [f"{s} ({fit[s]})" for s in students if fit[s] != "found"]
        shown = ", ".join(others[:8]) + (f" and {len(others) - 8} more" if len(others) > 8 else "")
        return [line + (f"; not: {shown}" if others else "")]

    def identify(self, student: str, *, gradebook_name: str = "", email: str = "") -> Identity:
        learned = self.learned.get(student)
        id_is = {CANVAS: CANVAS_USER_ID, MOODLE: PARTICIPANT_ID}.get(learned.lms, "") if learned else ""
        kinds = {CANVAS_USER_ID: ["ID"], PARTICIPANT_ID: ["participant"]}.get(
            id_is, ["participant", *CANVAS_IDS, *MOODLE_IDS]
        )
        person, in_roster = self._find(student, kinds)
        me = Identity(student, id_is=id_is, in_roster=in_roster)
        me.name = (person.name if person else "") or gradebook_name or (learned.name if learned else "")
        if person:
            me.section, me.canvas, me.moodle = person.section, dict(person.canvas), dict(person.moodle)
        if id_is == CANVAS_USER_ID:
            me.canvas = me.canvas or {"ID": student}
        if not id_is:  # the course's own id: what the course says it is, where the roster is silent
            if not me.canvas and self._may_be(self.canvas_id_column, in_roster):
                me.canvas = {self.canvas_id_column: student}
            if not me.moodle and self._may_be(self.moodle_id_column, in_roster):
                me.moodle, me.assumed = {self.moodle_id_column: student}, self.moodle_id_column
        if email:
            me.moodle.setdefault("Email address", email)
        return me


def n_students(n: int) -> str:
    return f"{n} student" + ("" if n == 1 else "s")


def listed(identities: list[Identity], shown: int = 8) -> str:
    """The students, by id and name, the first `shown` of them."""
    names = [f"{i.student} ({i.name})" if i.name else i.student for i in identities[:shown]]
    more = len(identities) - shown
    return ", ".join(names) + (f" and {more} more" if more > 0 else "")


def _folded(kind: str, value: str) -> str:
    """Emails are matched whatever their case; every other identifier as it is."""
    return value.strip().lower() if kind == "Email address" else value.strip()
