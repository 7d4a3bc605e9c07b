"""A submission's folder before anything copies or reads it, and the notes that come of it.

nbgrader copies a submission with `shutil.copy`, which follows links, as the grader's user
(root on a grading server): a link to a root-only file or a classmate's notebook would be
read, one to /dev/zero would be copied forever. Here every link, device, pipe, socket and
hard-linked file in the folder is replaced before that copy (by `backprop-ninja grade`
and again by nbgrader's pre-convert hook, so plain `nbgrader autograde` is covered too).

The notes for the student travel outside the notebook: a cell in the notebook is the
student's to write, so nothing in it can speak for the kit. The batch's preflight leaves
its notes in reports/intake/<student>.json, bound to the notebook it wrote by a sha256; the
hook, in the grading process itself, keeps them for RebuildFromSource.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from pathlib import Path

from ..exercise import spec
from ..quote import for_markdown
from ..settings import report_dir

# Files a browser would run if a TA opened them: the formgrader serves everything in a
# submission's autograded folder from the TA's own origin. Not copied for grading.
ACTIVE_SUFFIXES = (
    "html",
    "htm",
    "xhtml",
    "shtml",
    "mht",
    "mhtml",
    "svg",
    "svgz",
    "xml",
    "xsl",
    "xslt",
    "js",
    "mjs",
    "pdf",
    "swf",
)


def _any_case(suffix: str) -> str:
    return "*." + "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else c for c in suffix)


# for c.CourseDirectory.ignore (fnmatch is case-sensitive; browsers go by the suffix in any case)
ACTIVE_FILE_PATTERNS = [_any_case(s) for s in ACTIVE_SUFFIXES]
_notes: dict[str, list[str]] = {}  # student -> the kit's notes for this grading process


def _what(st: os.stat_result) -> str | None:
    mode = st.st_mode
    if stat.S_ISLNK(mode):
        return "a link"
    if stat.S_ISDIR(mode):
        return None
    if not stat.S_ISREG(mode):
        return "a device, pipe or socket"
    return "a hard link to another file" if st.st_nlink > 1 else None


def replace_non_regular(folder: Path, release_nb: Path) -> list[str]:
    """Remove what is not a plain file or folder; a notebook becomes the empty assignment."""
    notes = []
    if folder.is_symlink() or folder.parent.is_symlink():
        link = folder if folder.is_symlink() else folder.parent
        link.unlink()
        folder.mkdir(parents=True)
        shutil.copyfile(release_nb, folder / release_nb.name)
        return [
            "the submission folder was a link: it was not followed, and the empty assignment "
            "was graded in its place"
        ]
    for root, dirs, files in os.walk(folder, followlinks=False):
        for name in dirs + files:
            path = Path(root) / name
            what = _what(path.lstat())
            if what is None:
                if name.lower().rpartition(".")[2] in ACTIVE_SUFFIXES and name in files:
                    notes.append(
                        f"{for_markdown(path.relative_to(folder).as_posix())} is not copied for "
                        "grading: a browser would run it"
                    )
                continue
            path.unlink()
            rel = for_markdown(path.relative_to(folder).as_posix())
            if name.endswith(".ipynb"):
                shutil.copyfile(release_nb, path)
                notes.append(
                    f"your notebook {rel} was {what}: it was not followed, and the empty "
                    "assignment was graded in its place"
                )
            else:
                notes.append(f"{rel} was {what}: it was removed, not followed")
    return notes


def _digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def save_notes(course: Path, student: str, notes: list[str]) -> None:
    """The batch's preflight notes, bound to the notebook as the preflight left it."""
    out = report_dir(course) / "intake"
    out.mkdir(parents=True, exist_ok=True)
    nb = course / "submitted" / student / spec.ASSIGNMENT / f"{spec.NOTEBOOK}.ipynb"
    (out / f"{student}.json").write_text(json.dumps({"sha256": _digest(nb), "notes": notes}))


def _saved_notes(course: Path, student: str, notebook: Path) -> list[str]:
    try:
        saved = json.loads((report_dir(course) / "intake" / f"{student}.json").read_text())
    except (OSError, ValueError):
        return []
    if not isinstance(saved, dict) or saved.get("sha256") != _digest(notebook):
        return []  # written for another version of the submission
    return [str(n) for n in saved.get("notes", []) if isinstance(n, str)]


def before_autograde(*, assignment: str, student: str, notebooks: list[str]) -> None:
    """nbgrader's Autograde.pre_convert_hook: runs for each submission right before nbgrader
    copies its folder. `student` may be nbgrader's '*': the folder says who it is."""
    if not notebooks:
        return
    folder = Path(notebooks[0]).parent
    who, course = folder.parent.name, folder.parents[2]
    release_nb = course / "release" / folder.name / f"{spec.NOTEBOOK}.ipynb"
    try:  # first: even reading the notebook to check the saved notes could follow a link
        notes = replace_non_regular(folder, release_nb)
        notes = _saved_notes(course, who, folder / f"{spec.NOTEBOOK}.ipynb") + notes
    except OSError as e:
        # nbgrader swallows a hook's exception: leave nothing it could follow
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(release_nb, folder / f"{spec.NOTEBOOK}.ipynb")
        notes = [f"your submission could not be checked ({for_markdown(e)}): the empty assignment was graded"]
    _notes[who] = notes


def notes_for(student: str) -> list[str]:
    """The kit's notes about this submission so far (markdown, with the student's text quoted)."""
    return list(_notes.get(student, []))
