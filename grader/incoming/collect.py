"""`backprop-ninja collect COURSE ZIP`: an LMS's "download all submissions" zip into
submitted/<student_id>/backprop_ninja/backprop_ninja.ipynb, for `backprop-ninja grade` or nbgrader autograde.

Which student a file is: lms_names.py. In short, Canvas's flat `<name>_<userid>_<submissionid>_<file>`
(`<name>_LATE_...` for late work) and Moodle's `<Full Name>_<participantid>_assignsubmission_file_/<file>`
(or flat `..._assignsubmission_file_<file>`); which LMS made the zip is decided once, from all its
entries, and the id is read only from the part of the name the LMS wrote. A file name in which
the student wrote an LMS marker (another student's id, a second marker) is refused out loud, and
the rest of the zip collected. The student id is the id the LMS wrote (digits: Canvas's user id,
Moodle's participant id). Canvas adds `-1`, `-2`, ... before the extension of a file uploaded
again under the same name (`backprop_ninja-1.ipynb`: the course's own observation, no public
source found for it). Files of Moodle's other submission plugins (onlinetext, ...) are not
notebooks and are skipped. Whose LMS ids the student ids are, and the names the LMS wrote, go to
submitted/lms_students.csv, for the LMS exports (lms_names.py).

Two notebooks for one student: the latest is kept, by the highest submission id (Canvas), then
the highest upload suffix (-2 after -1 after none), then the latest zip entry time, then the
later entry in the zip; the summary says which rule decided and lists the ones left.

The zip is hostile: only the chosen notebooks are read, one entry at a time (never extractall).
Entries with an absolute path, `..`, a backslash or control characters, links and other
non-regular files, encrypted entries and entries declared over the per-notebook limit are
skipped; while extracting, the bytes really read are counted against the per-notebook and total
limits, and the size and CRC must match what the zip declared (a zip bomb or a lying header is
skipped). A notebook goes through a new file renamed into place; a link on the way is not
followed. One already in submitted/ is replaced, and the summary says so (--keep-existing keeps
it). Whether it is a readable notebook is for the batch's preflight (preflight.py) to find out.
"""

from __future__ import annotations

import argparse
import os
import re
import stat
import sys
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from ..exercise import spec
from ..settings import MAX_ENTRIES, MAX_NOTEBOOK_BYTES, MAX_TOTAL_BYTES
from .lms_names import (
    LEARNED,
    Layout,
    Learned,
    Refused,
    decide,
    parse,
    parse_undecided,
    record_learned,
    shown,
)

_CHUNK = 2**16
_UPLOAD = re.compile(r".*?(?:-(?P<n>[0-9]{1,6}))?\.ipynb", re.I | re.S)
_RULES = ("the highest submission id", "the highest upload suffix", "the latest zip entry time", "zip order")


@dataclass
class Placed:
    student: str
    entry: str  # the zip entry it came from
    lms: str
    late: bool = False
    notes: list[str] = field(default_factory=list)


@dataclass
class Skipped:
    entry: str
    reason: str


@dataclass
class Result:
    placed: list[Placed] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    layout: str = ""  # which LMS made the zip, and how that was decided
    learned: str = ""  # what was recorded in submitted/lms_students.csv for the LMS exports

    def summary(self) -> str:
        lines = [self.layout] if self.layout else []
        for p in self.placed:
            notes = [p.lms] + (["late"] if p.late else []) + p.notes
            lines.append(f"placed   {p.student} <- {shown(p.entry)} ({'; '.join(notes)})")
        lines += [f"skipped  {shown(s.entry)}: {s.reason}" for s in self.skipped]
        lines += [self.learned] if self.learned else []
        lines.append(f"{len(self.placed)} notebooks placed in submitted/, {len(self.skipped)} skipped")
        return "\n".join(lines)


@dataclass
class _Candidate:
    info: zipfile.ZipInfo
    index: int
    student: str
    lms: str
    late: bool
    submission: int
    upload: int
    name: str  # as the LMS wrote it

    def rank(self) -> tuple:
        return (self.submission, self.upload, self.info.date_time, self.index)


def _size(n: int) -> str:
    return f"{n / 2**20:.1f} MB" if n >= 2**20 else f"{n} bytes"


def _unsafe(info: zipfile.ZipInfo) -> str | None:
    name, mode = info.filename, info.external_attr >> 16
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in name):
        return "control characters in the name"
    if "\\" in name:
        return "a backslash in the name"
    if name.startswith("/") or re.match(r"[A-Za-z]:", name):
        return "an absolute path"
    if ".." in name.split("/"):
        return "a path out of the folder (..)"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_IFMT(mode) not in (0, stat.S_IFREG):
        return "not a regular file"
    if info.flag_bits & 0x1:
        return "encrypted"
    return None


def _candidate(info: zipfile.ZipInfo, index: int, limit: int, layout: Layout) -> _Candidate:
    reason = _unsafe(info)
    if reason:
        raise Refused(reason)
    if layout.lms is None:
        parse_undecided(info.filename, layout)  # always refuses, with the most telling reason
    named = parse(info.filename, layout.lms)
    upload = _UPLOAD.fullmatch(named.file.rpartition("/")[2])
    if upload is None:
        raise Refused("not a notebook")
    if info.file_size > limit:
        raise Refused(f"declared {_size(info.file_size)}, over the {_size(limit)} a notebook may have")
    n = named
    return _Candidate(info, index, n.student, n.lms, n.late, n.submission, int(upload["n"] or 0), n.name)


def _choose(candidates: list[_Candidate]) -> tuple[_Candidate, str]:
    ranked = sorted(candidates, key=_Candidate.rank, reverse=True)
    if len(ranked) == 1:
        return ranked[0], ""
    rule = next(r for r, a, b in zip(_RULES, ranked[0].rank(), ranked[1].rank()) if a != b)
    return ranked[0], f"kept the latest of {len(ranked)} notebooks, by {rule}"


@dataclass
class _Job:
    zf: zipfile.ZipFile
    course: Path
    keep_existing: bool
    limit: int  # bytes a notebook
    total: int  # bytes all notebooks
    used: int = 0


def _extract(job: _Job, info: zipfile.ZipInfo, out_path: Path) -> None:
    """Copy one entry into a new file, counting what is really read; Refused past a limit."""
    out_path.unlink(missing_ok=True)  # a leftover of an interrupted run (unlink follows no link)
    fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    written = 0
    with os.fdopen(fd, "wb") as out, job.zf.open(info) as src:
        while chunk := src.read(_CHUNK):
            written += len(chunk)
            if written > job.limit:
                raise Refused(f"more than {_size(job.limit)} once extracted")
            if job.used + written > job.total:
                raise Refused(f"the notebooks together exceed {_size(job.total)}")
            out.write(chunk)
    if written != info.file_size:
        raise Refused(f"{written} bytes once extracted, {info.file_size} declared")
    job.used += written


def _link_on_the_way(course: Path, dest: Path) -> Path | None:
    parts = dest.relative_to(course).parts
    paths = [course.joinpath(*parts[: i + 1]) for i in range(len(parts))]
    return next((p for p in paths if p.is_symlink()), None)


def _place(job: _Job, chosen: _Candidate) -> Placed | Skipped:
    entry, course = chosen.info.filename, job.course
    dest = course / "submitted" / chosen.student / spec.ASSIGNMENT / f"{spec.NOTEBOOK}.ipynb"
    link = _link_on_the_way(course, dest)
    if link is not None:
        return Skipped(entry, f"{link.relative_to(course)} is a link: not followed")
    existed = dest.exists()
    if existed and job.keep_existing:
        return Skipped(entry, f"student {chosen.student} already has a submission (kept: --keep-existing)")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.collecting")
    try:
        _extract(job, chosen.info, tmp)
    except (Refused, zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError) as e:
        tmp.unlink(missing_ok=True)
        return Skipped(entry, f"not extracted: {e}")
    notes = []
    if existed:
        same = dest.stat().st_size == tmp.stat().st_size and dest.read_bytes() == tmp.read_bytes()
        notes.append("same as the notebook already there" if same else "REPLACED the notebook already there")
    os.replace(tmp, dest)
    return Placed(chosen.student, entry, chosen.lms, chosen.late, notes)


def _candidates(zf: zipfile.ZipFile, limit: int, result: Result) -> dict[str, list[_Candidate]]:
    infos = zf.infolist()
    if len(infos) > MAX_ENTRIES:
        raise ValueError(f"{len(infos)} entries, over the {MAX_ENTRIES} a submissions zip may have")
    files = [info for info in infos if not info.is_dir()]
    layout = decide([info.filename for info in files if _unsafe(info) is None])
    result.layout = layout.why if layout.lms else f"which LMS made this zip cannot be told: it {layout.why}"
    by_student: dict[str, list[_Candidate]] = {}
    for index, info in enumerate(infos):
        if info.is_dir():
            continue
        try:
            c = _candidate(info, index, limit, layout)
        except Refused as e:
            result.skipped.append(Skipped(info.filename, str(e)))
            continue
        by_student.setdefault(c.student, []).append(c)
    return by_student


def collect_zip(
    *,
    course: Path,
    zip_path: Path,
    keep_existing: bool = False,
    max_notebook_bytes: int = MAX_NOTEBOOK_BYTES,
    max_total_bytes: int = MAX_TOTAL_BYTES,
) -> Result:
    """Place each student's latest notebook from ZIP_PATH in COURSE/submitted/."""
    result = Result()
    with zipfile.ZipFile(zip_path) as zf:
        job = _Job(zf, course, keep_existing, max_notebook_bytes, max_total_bytes)
        by_student = _candidates(zf, max_notebook_bytes, result)
        for student in sorted(by_student, key=lambda s: (len(s), s)):
            chosen, rule = _choose(by_student[student])
            older = [c.info.filename for c in by_student[student] if c is not chosen]
            result.skipped += [Skipped(e, f"older than {shown(chosen.info.filename)}") for e in older]
            done = _place(job, chosen)
            if isinstance(done, Placed) and rule:
                done.notes.insert(0, rule)
            (result.placed if isinstance(done, Placed) else result.skipped).append(done)
    if by_student:
        result.learned = _record(course, [c[0] for c in by_student.values()])
    return result


def _record(course: Path, candidates: list[_Candidate]) -> str:
    """Whose LMS ids the student ids are, and their names, for backprop-ninja report."""
    learned = [Learned(c.student, c.lms, c.name) for c in candidates]
    lms = learned[0].lms  # one LMS a zip
    try:
        record_learned(course, learned)
    except OSError as e:
        return f"{LEARNED} not written ({e}): the LMS exports cannot tell these ids are {lms}'s"
    return f"{len(learned)} students' {lms} ids and names recorded in {LEARNED} (for the LMS exports)"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="backprop-ninja collect",
        description="Fill COURSE/submitted/ from a Canvas or Moodle 'download all submissions' zip.",
    )
    parser.add_argument("course", type=Path, help="the course folder (with nbgrader_config.py)")
    parser.add_argument("zip", type=Path, help="the zip the LMS gave")
    parser.add_argument("--keep-existing", action="store_true", help="never replace a notebook in submitted/")
    parser.add_argument("--max-notebook-mb", type=float, default=MAX_NOTEBOOK_BYTES / 2**20)
    parser.add_argument("--max-total-mb", type=float, default=MAX_TOTAL_BYTES / 2**20)
    args = parser.parse_args(argv)
    if not args.course.is_dir():
        print(f"{args.course} is not a folder", file=sys.stderr)
        return 2
    try:
        result = collect_zip(
            course=args.course.resolve(),
            zip_path=args.zip,
            keep_existing=args.keep_existing,
            max_notebook_bytes=int(args.max_notebook_mb * 2**20),
            max_total_bytes=int(args.max_total_mb * 2**20),
        )
    except (OSError, zipfile.BadZipFile, ValueError) as e:
        print(f"{args.zip} could not be read as a zip: {e}", file=sys.stderr)
        return 1
    print(result.summary())
    return 0
