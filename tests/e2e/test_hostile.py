"""Bad input and attacks, through the kit's batch command (preflight, then the real
`nbgrader autograde` in the sandbox): each case gets its expected grade and message, the
honest submissions in the same batch keep their exact grades, nothing outside a
submission's scratch is changed, nothing a submission started outlives the batch, the
machine's disk and the grading process's memory stay bounded, and a re-run or a resumed
batch gives the same grades.

HOSTILE_ONLY=h31,h32 grades only the cases whose ids start so (and the classmate the
escapes aim at): for looking into one attack; the suite runs them all."""

from __future__ import annotations

import functools
import hashlib
import html
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import pytest

from grader.confine import bwrap_works
from grader.exercise import spec
from grader.reports.scores import read_scores

import footholds
from conftest import nbgrader
from hostile import ALL, CASES, SECRETS, VICTIM
from hostile_payloads import DAEMON_MARK

pytestmark = pytest.mark.skipif(not bwrap_works(), reason="bubblewrap is needed (.ci/run installs it)")
FAST = ["--Execute.timeout=20", "--ReplayGrades.run_timeout=20"]
NB = f"{spec.NOTEBOOK}.ipynb"
GIB = 2**30
# Every sandboxed process runs as a user other than root: `nobody` (65534), or a uid of its
# own from the kit's pool (grader/confine/users.py); the grader itself is root.
DISK_LIMIT = 1.2 * GIB  # the batch may take this much disk, at most
GRADER_RSS_LIMIT = 2 * GIB  # the largest grading process (nbgrader and the judge in it)
BRAKE = 2.5 * GIB  # the machine is shared: past this the sandboxed processes are
HARD_BRAKE = 4 * GIB  # killed, past this (or the machine's free disk down by
MACHINE_BRAKE = 10 * GIB  # MACHINE_BRAKE) the whole batch
KIT_TEMP = ("bn-", "backprop-ninja", "replay-")  # the kit's folders in the temp folder
MB = 2**20

_only = [p for p in os.environ.get("HOSTILE_ONLY", "").split(",") if p]
SELECTED = [c for c in CASES if not _only or c.student == VICTIM or c.student.startswith(tuple(_only))]
HONEST = [c.student for c in SELECTED if c.write.__name__ == "honest"]


def _batch(course, *extra, watch=None):
    env = dict(os.environ, BACKPROP_NINJA_STATEMENT_SECONDS="3", BACKPROP_NINJA_MEMORY_MB="4096")
    proc = subprocess.Popen(
        [sys.executable, "-m", "grader", "grade", str(course), *extra, *FAST],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    if watch:
        watch.root = proc.pid
    try:
        out, _ = proc.communicate(timeout=3600)
    except subprocess.TimeoutExpired:
        _kill_tree(proc.pid)
        out, _ = proc.communicate()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, "")


def _digest(path):
    h = hashlib.sha256()
    for p in sorted(path.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(path)).encode() + p.read_bytes())
    return h.hexdigest()


# ------------------------------------------------------------ processes
def _processes() -> dict[int, dict]:
    """pid -> ppid, real uid, resident KiB, command line (processes that vanish are skipped)."""
    out = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            status = Path(entry.path, "status").read_text()
            cmd = Path(entry.path, "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        out[int(entry.name)] = {
            "ppid": int(fields["PPid"]),
            "uid": int(fields["Uid"].split()[0]),
            "rss": int(fields.get("VmRSS", "0 kB").split()[0]),
            "cmd": cmd.strip(),
        }
    return out


def _descendants(root: int, procs: dict) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid, p in procs.items():
        children.setdefault(p["ppid"], []).append(pid)
    found, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _kill_tree(root: int) -> None:
    for pid in _descendants(root, _processes()) | {root}:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _under_another_run(pid: int, procs: dict) -> bool:
    """A live test run or nbgrader above it: someone else's, on this shared machine (once the
    batch has ended, what it left behind hangs from init, not from this test)."""
    seen = set()
    while pid in procs and pid not in seen and pid > 1:
        seen.add(pid)
        pid = procs[pid]["ppid"]
        cmd = procs.get(pid, {}).get("cmd", "")
        if pid != os.getpid() and ("pytest" in cmd or "nbgrader" in cmd):
            return True
    return False


def _strays(before: set[int]) -> dict[int, str]:
    """Processes of a sandbox user (any but root: `nobody` or the kit's pool) that did not exist
    before and are not under a live run, and processes of any user with a daemon's mark."""
    procs = _processes()
    return {
        pid: f"uid {p['uid']}: {p['cmd'][:150]}"
        for pid, p in procs.items()
        if pid not in before
        and (DAEMON_MARK in p["cmd"] or p["uid"] != 0 and not _under_another_run(pid, procs))
    }


def _du(path: Path) -> int:
    """Bytes allocated on disk under `path` (links not followed)."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                pass
    return total


class Watch(threading.Thread):
    """While the batch runs, every 0.2 s: the disk the batch takes (what the course folder grew
    by, plus the kit's folders that appeared in the temp folder: kernel scratch, replay exchange),
    the machine's free disk, and the largest resident memory of a grading process (a root-owned
    descendant of the batch). The machine is shared, so the disk the batch takes is measured
    where it writes (other jobs here install virtualenvs and grade courses of their own), and
    past BRAKE the sandboxed processes of the batch are killed, past HARD_BRAKE (or a machine
    that lost MACHINE_BRAKE) the whole batch; either is recorded and fails the bounds test."""

    def __init__(self, path: Path):
        super().__init__(daemon=True)
        self.path, self.root, self.stopped = path, None, threading.Event()
        self.tmp = Path(tempfile.gettempdir())
        self.tmp0, self.course0 = set(os.listdir(self.tmp)), _du(path)
        self.free0 = shutil.disk_usage(path).free
        self.max_use, self.max_drop, self.max_rss, self.max_rss_cmd, self.brakes = 0, 0, 0, "", []
        self.t0, self.peaks, self.logged = time.monotonic(), [], {}  # a line per 256 MB a maximum grows

    def _peak(self, what: str, value: int) -> None:
        if value < self.logged.get(what, 0) + 256 * MB:
            return
        self.logged[what] = value
        graded = sorted((self.path / "autograded").glob("*"), key=lambda p: p.stat().st_mtime)
        self.peaks.append(
            f"{time.monotonic() - self.t0:.0f} s: {what} {value / GIB:.2f} GiB "
            f"({graded[-1].name if graded else 'before the first student'})"
        )

    def run(self):
        while not self.stopped.wait(0.2):
            try:
                self._sample()
            except OSError:  # a folder or process that vanished while looked at: next sample
                pass

    def _sample(self):
        use = (
            _du(self.path)
            - self.course0
            + sum(
                _du(self.tmp / name)
                for name in os.listdir(self.tmp)
                if name not in self.tmp0 and name.startswith(KIT_TEMP)
            )
        )
        drop = self.free0 - shutil.disk_usage(self.path).free
        self._peak("disk taken", use)
        self.max_use, self.max_drop = max(self.max_use, use), max(self.max_drop, drop)
        if self.root is None:
            return
        procs = _processes()
        tree = _descendants(self.root, procs) | {self.root}
        for pid in tree:
            p = procs.get(pid)
            if p and p["uid"] == 0 and p["rss"] * 1024 > self.max_rss:
                self.max_rss, self.max_rss_cmd = p["rss"] * 1024, p["cmd"][:120]
                self._peak("grader memory", self.max_rss)
        if use > HARD_BRAKE or drop > MACHINE_BRAKE:
            self._brake(
                f"the batch took {use / GIB:.1f} GiB of disk (the machine lost {drop / GIB:.1f}): "
                "the batch was killed"
            )
            _kill_tree(self.root)
        elif use > BRAKE:
            self._brake(f"the batch took {use / GIB:.1f} GiB of disk: the sandboxed processes were killed")
            for pid in tree:
                if procs.get(pid, {}).get("uid", 0) != 0:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass

    def _brake(self, what: str) -> None:
        if not self.brakes or self.brakes[-1].split(":")[-1] != what.split(":")[-1]:
            self.brakes.append(what)

    def stop(self) -> dict:
        self.stopped.set()
        self.join()
        return {
            "max_disk_taken_gib": round(self.max_use / GIB, 3),
            "max_machine_disk_drop_gib": round(self.max_drop / GIB, 3),
            "max_grader_rss_gib": round(self.max_rss / GIB, 3),
            "max_grader_rss_process": self.max_rss_cmd,
            "brakes": self.brakes,
            "peaks": self.peaks,
        }


# ------------------------------------------------------------ the batch
@dataclass
class Batch:
    course: Path
    before: dict
    proc: subprocess.CompletedProcess
    seconds: float
    watch: dict
    strays: dict = field(default_factory=dict)


@pytest.fixture(scope="module")
def hostile_course(tmp_path_factory, new_course):
    course = new_course(tmp_path_factory.mktemp("hostile"))  # the session's release, copied
    nbs = {
        "source": nbformat.read(course / "source" / "backprop_ninja" / "backprop_ninja.ipynb", 4),
        "release": nbformat.read(course / "release" / "backprop_ninja" / "backprop_ninja.ipynb", 4),
    }
    for case in SELECTED:
        case.write(course / "submitted" / case.student / spec.ASSIGNMENT, nbs)
    before = {"source": _digest(course / "source"), **{s: _digest(course / "submitted" / s) for s in HONEST}}
    sandboxed = {pid for pid, p in _processes().items() if p["uid"] != 0 or DAEMON_MARK in p["cmd"]}
    watch = Watch(course)
    watch.start()
    try:
        t0 = time.monotonic()
        proc = _batch(course, watch=watch)
        seconds = time.monotonic() - t0
        stats = watch.stop()
        log = course / "reports" / "autograde.log"
        if log.exists():  # the re-run test's batch writes its own
            shutil.copy(log, course / "reports" / "autograde-first-batch.log")
        deadline = time.monotonic() + 15  # a sandbox being torn down takes a moment
        while (strays := _strays(sandboxed)) and time.monotonic() < deadline:
            time.sleep(0.5)
        feedback = nbgrader(course, "generate_feedback", "backprop_ninja", "--force", check=False)
        summary = {
            "batch_seconds": round(seconds, 1),
            "students": len(SELECTED),
            **stats,
            "strays": strays,
            "feedback_exit": feedback.returncode,
        }
        (course / "hostile-summary.json").write_text(json.dumps(summary, indent=1))
        print("\nhostile batch:", json.dumps(summary))
        yield Batch(course, before, proc, seconds, stats, strays)
    finally:
        watch.stopped.set()
        for path in course.rglob("*"):  # what a runaway copy left (the disk is shared)
            if path.is_file() and not path.is_symlink() and path.stat().st_size > 50 * MB:
                path.unlink()


def _scores(course):
    """The gradebook's scores, read again only when the gradebook changed (a read costs over a
    second, and 54 cases read it)."""
    db = course / "gradebook.db"
    return _read_scores(str(db), db.stat().st_mtime_ns, db.stat().st_size)


@functools.lru_cache(maxsize=4)
def _read_scores(db: str, _mtime_ns: int, _size: int) -> dict:
    return {s.student: s.by_grade_id for s in read_scores(f"sqlite:///{db}")}


def _feedback_html(course, student) -> str:
    return (course / "feedback" / student / spec.ASSIGNMENT / f"{spec.NOTEBOOK}.html").read_text(
        errors="replace"
    )


def _feedback_text(course, student):
    """What the page says, its white space folded (a verdict's long line wraps in its cell)."""
    page = re.sub(r"<(style|script)\b.*?</\1>", "", _feedback_html(course, student), flags=re.S | re.I)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", page)).replace("`", "").split())


def _autograded(course, student) -> Path:
    return course / "autograded" / student / spec.ASSIGNMENT / NB


def _kit_note(course, student) -> str:
    """The kit's note: the first cell of the graded notebook, when it is one (the kit puts it there)."""
    cells = json.loads(_autograded(course, student).read_text())["cells"]
    first = "".join(cells[0]["source"]) if cells and cells[0]["cell_type"] == "markdown" else ""
    return first if "**Autograder note.**" in first else ""


def _selected(*students):
    missing = [s for s in students if s not in {c.student for c in SELECTED}]
    if missing:
        pytest.skip(f"not selected: {missing}")


def test_every_submission_was_graded(hostile_course):
    course, proc = hostile_course.course, hostile_course.proc
    summary = json.loads((course / "reports" / "batch.json").read_text())
    first_log = course / "reports" / "autograde-first-batch.log"
    log = first_log.read_text(errors="replace").splitlines() if first_log.exists() else []
    errors = [line for line in log if "ERROR" in line or "Error" in line or "Traceback" in line][-30:]
    graded = {s for s, i in summary["students"].items() if i["graded"]}
    assert graded == {c.student for c in SELECTED}, (sorted({c.student for c in SELECTED} - graded), errors)
    assert proc.returncode == 0, proc.stdout[-3000:]


@pytest.mark.parametrize("case", SELECTED, ids=[c.student for c in SELECTED])
def test_grade_and_message(hostile_course, case):
    course = hostile_course.course
    expected = {gid: 0.0 if gid in case.zeros else spec.BY_GRADE_ID[gid].points for gid in ALL}
    got = _scores(course)[case.student]
    wrong = {
        gid: f"{got.get(gid)} (expected {expected[gid]})"
        for gid in ALL
        if not (got.get(gid) == expected[gid] or case.at_most and got.get(gid, 0) <= expected[gid])
    }
    assert not wrong, f"{sum(got.values()):g}/{sum(expected.values()):g}: {wrong}"
    text = _feedback_text(course, case.student)
    for words in case.says:  # a tuple: any of them
        options = (words,) if isinstance(words, str) else words
        assert any(" ".join(w.replace("`", "").split()) in text for w in options), options
    record = json.loads((course / "reports" / "replay" / f"{case.student}.json").read_text())
    if case.suspicious is not None:
        assert bool(record["flags"]) == case.suspicious, record["flags"]


def test_nothing_outside_the_scratch_changed(hostile_course):
    course, before = hostile_course.course, hostile_course.before
    assert _digest(course / "source") == before["source"]
    changed = [s for s in HONEST if _digest(course / "submitted" / s) != before[s]]
    ran = {p.name: p.read_text() for p in course.glob("PWNED-*")}  # a submission's code, outside the sandbox
    assert not changed and not ran, f"honest submissions changed: {changed}; markers: {ran}"
    if "h22_read_secrets" in {c.student for c in SELECTED}:
        text = _feedback_text(course, "h22_read_secrets")
        assert "BEGIN SOLUTION" not in text and "FOUND 0" in text


def test_nothing_a_submission_started_outlives_the_batch(hostile_course):
    assert not hostile_course.strays, hostile_course.strays


def test_the_machine_stays_within_bounds(hostile_course):
    """Disk: a few kernels' scratch at a time, never what a submission can write. Memory: the
    grading process never holds what a submission sends it."""
    w = hostile_course.watch
    assert not w["brakes"], w["brakes"]
    assert w["max_disk_taken_gib"] * GIB <= DISK_LIMIT, w
    assert w["max_grader_rss_gib"] * GIB <= GRADER_RSS_LIMIT, w


def test_links_are_not_followed(hostile_course):
    """A link's target (a root-only file, a classmate's notebook, /dev/zero) is never read for
    the student: no secret in anything the students get back, no endless copy."""
    course, chosen = hostile_course.course, {c.student for c in SELECTED}
    if not chosen & {"h29_links", "h30_notebook_link"}:
        pytest.skip("not selected: h29_links, h30_notebook_link")
    if "h29_links" in chosen:
        for top in ("autograded", "feedback"):
            for path in (course / top).rglob("*"):
                if path.is_file() and not path.is_symlink() and path.stat().st_size < 50 * MB:
                    data = path.read_bytes()
                    for secret in SECRETS.values():
                        assert secret.encode() not in data, f"{secret} in {path}"
            folder = course / top / "h29_links"
            size = sum(p.lstat().st_size for p in folder.rglob("*"))
            assert size < 5 * MB, f"{folder}: {size / MB:.0f} MB"
    if "h30_notebook_link" in chosen:
        note = _kit_note(course, "h30_notebook_link")
        assert "link" in note.lower(), note
        assert "link" in _feedback_text(course, "h30_notebook_link").lower()


def test_student_text_is_quoted_not_obeyed(hostile_course):
    """Grade ids with markup and escape codes arrive as text; a cell marked as the kit's note is
    not the kit's note."""
    _selected("h42_markup")
    course = hostile_course.course
    page = _feedback_html(course, "h42_markup")
    assert not re.search(r"<img\b[^>]*onerror", page, re.I), re.findall(r".{80}onerror.{40}", page)[:3]
    assert "\x1b" not in page
    log = (course / "reports" / "autograde.log").read_bytes()
    assert b"\x1b" not in log, [log[max(0, i - 80) : i + 20] for i in [log.index(b"\x1b")]]
    note = _kit_note(course, "h42_markup")
    assert note, "the kit said nothing about the unknown grade ids"
    assert "the instructor approved" not in note, note


def test_output_is_bounded(hostile_course):
    _selected("h43_many_outputs")
    size = _autograded(hostile_course.course, "h43_many_outputs").stat().st_size
    assert size < 25 * MB, f"{size / MB:.0f} MB"


def test_no_foothold_in_home_reaches_a_classmate(hostile_course):
    """Issue 17: what h44-h47 planted in HOME (/tmp), in folders locked 0555, is neither run nor
    found in a kernel graded after them: h48 starts bash, Python, IPython and matplotlib, and
    n01, n02 are graded after all of them. tests/e2e/test_tmp_footholds.py: warm and cold, one
    grading process and two."""
    _selected("h44_tmp_ipython", "h48_probe_after_footholds")
    course = hostile_course.course
    assert "0 of an attacker: []" in _autograded(course, "h48_probe_after_footholds").read_text()
    later = [c.student for c in SELECTED if c.student > "h48" and not c.student.startswith("h4")]
    for student in ["h48_probe_after_footholds", *later]:
        assert footholds.MARK not in _autograded(course, student).read_text(), student


def test_rerun_and_resume_give_the_same_grades(hostile_course):
    _selected("n01_honest", "n02_honest_mistake", "h04_nbformat3")
    course = hostile_course.course
    first = _scores(course)
    graded = course / "autograded"
    kept = {
        s: (graded / s / spec.ASSIGNMENT / f"{spec.NOTEBOOK}.ipynb").stat().st_mtime_ns
        for s in ("n01_honest", "h04_nbformat3")
    }
    # an interrupted batch: one student's grading never finished
    (graded / "n02_honest_mistake" / spec.ASSIGNMENT / f"{spec.NOTEBOOK}.ipynb").unlink()
    proc = _batch(course)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert _scores(course) == first
    assert (graded / "n02_honest_mistake" / spec.ASSIGNMENT / f"{spec.NOTEBOOK}.ipynb").exists()
    for s, mtime in kept.items():  # finished ones were not graded again
        assert (graded / s / spec.ASSIGNMENT / f"{spec.NOTEBOOK}.ipynb").stat().st_mtime_ns == mtime
