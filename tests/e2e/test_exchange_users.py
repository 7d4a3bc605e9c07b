"""The course-local exchange with students as real Unix accounts on one machine (the JupyterHub
setup; grader/incoming/inbound.py), through real nbgrader: two accounts made with useradd for this
module fetch and `nbgrader submit` as themselves; then alice plants folders in inbound/ with
mkdir and cp, as issue 17 found: in bob's name dated 2099 (the issue's) and dated now, one of
her own dated 2099, 2000 in bob's name, and later 100 of her own, newer than her submission,
whose notebook is a link to the instructor's solution. `nbgrader collect` keeps bob's and
alice's real submissions, refuses the rest in a few lines, and looks at no more than alice's
latest 20; the file system stops her listing inbound/ or renaming bob's folder. The accounts are
removed at the end (userdel -r), and no process of theirs may be left.

Root only (useradd). The virtualenv's Python may live under a folder the students cannot enter
(/root/.pyenv here): then each student command runs in a mount namespace of its own in which that
one folder is visible again; the student is still the real account, and its files real files.
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
import pytest

from grader.exercise import spec
from grader.incoming import exchange
from grader.incoming.submissions import fill, reference_answers

from conftest import VENV_BIN, nbgrader

NB = f"{spec.ASSIGNMENT}/{spec.NOTEBOOK}.ipynb"
FUTURE = "2099-01-01 00:00:00.000000 UTC"
TOOLS = ("useradd", "userdel", "runuser", "unshare")

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not all(map(shutil.which, TOOLS)),
    reason="real student accounts need root and " + ", ".join(TOOLS),
)


def _closed_ancestor(path: Path) -> Path | None:
    """The highest folder above PATH that other accounts cannot enter, if any."""
    for p in reversed(path.parents):
        if not os.stat(p).st_mode & 0o001:
            return p
    return None


_STAGE: list[Path] = []  # an empty folder of this module's, where a namespace may mount things


def as_user(name: str, *argv: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    """ARGV as the account NAME, with a clean environment (its HOME, the virtualenv on PATH)."""
    home = pwd.getpwnam(name).pw_dir
    env = ["env", "-i", f"HOME={home}", f"USER={name}", f"LOGNAME={name}", "LANG=C.UTF-8"]
    env.append(f"PATH={VENV_BIN}:/usr/bin:/bin")
    cmd = ["runuser", "-u", name, "--", *env, *argv]
    prefix = Path(sys.base_prefix).resolve()
    closed = _closed_ancestor(prefix)
    if closed is not None:  # PREFIX alone visible again: a tmpfs over CLOSED, PREFIX bound back into it
        script = (
            'set -e; mount --bind "$1" "$3"; mount -t tmpfs -o mode=0755 none "$2"; '
            'mkdir -p "$1"; mount --bind "$3" "$1"; shift 3; cd "$0"; exec "$@"'
        )
        places = [str(cwd), str(prefix), str(closed), str(_STAGE[0])]
        cmd = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, *places, *cmd]
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=600)
    if check:
        assert proc.returncode == 0, f"{' '.join(argv)} as {name}:\n{proc.stdout}\n{proc.stderr}"
    return proc


def processes_of(uids: set[int]) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid in uids:
                    pids.append(int(entry.name))
            except FileNotFoundError:
                pass
    return pids


@pytest.fixture(scope="module")
def accounts():
    """{'alice': name, 'bob': name}: two new accounts, removed at the end."""
    made: list[str] = []
    _STAGE.append(Path(tempfile.mkdtemp(prefix="bn-stage-")))
    try:
        for role in ("alice", "bob"):
            name = f"bn{role}{secrets.token_hex(3)}"
            subprocess.run(["useradd", "-m", "-U", "-s", "/bin/sh", name], check=True, capture_output=True)
            made.append(name)
        yield dict(zip(("alice", "bob"), made))
    finally:
        uids = {pwd.getpwnam(n).pw_uid for n in made}
        left = processes_of(uids)
        for pid in left:  # only this module ran anything as these accounts
            os.kill(pid, 9)
        for name in made:
            subprocess.run(["userdel", "-r", name], capture_output=True, check=False)
        still = [n for n in made if subprocess.run(["id", n], capture_output=True).returncode == 0]
        _STAGE.pop().rmdir()
        assert not left and not still, f"processes {left} left running; accounts {still} not removed"


def _student(name: str, course: Path) -> Path:
    home = Path(pwd.getpwnam(name).pw_dir)
    (home / ".jupyter").mkdir()
    (home / ".jupyter" / "nbgrader_config.py").write_text(exchange.student_config(course_root=course))
    (home / "work").mkdir()
    subprocess.run(["chown", "-R", f"{name}:{name}", str(home)], check=True)
    as_user(name, "nbgrader", "fetch_assignment", spec.ASSIGNMENT, cwd=home / "work")
    return home / "work"


PLANT = """
import os, sys, shutil
inbound, release, bob, alice = sys.argv[1:5]
def plant(name, notebook=None, link=None):
    d = os.path.join(inbound, name)
    os.mkdir(d)
    if notebook:
        shutil.copy(notebook, os.path.join(d, "backprop_ninja.ipynb"))
    if link:
        os.symlink(link, os.path.join(d, "backprop_ninja.ipynb"))
    with open(os.path.join(d, "timestamp.txt"), "w") as f:
        f.write(name.split("+")[2])
    os.chmod(d, 0o777)
"""

PLANT_FIRST = (
    PLANT
    + """
now = sys.argv[5]
plant(f"{bob}+backprop_ninja+2099-01-01 00:00:00.000000 UTC+x", release)
plant(f"{bob}+backprop_ninja+{now}+y", release)
plant(f"{alice}+backprop_ninja+2099-01-01 00:00:00.000000 UTC+z", release)
for k in range(2000):
    plant(f"{bob}+backprop_ninja+{now}+f{k}")
"""
)

PLANT_LINKS = (
    PLANT
    + """
from datetime import datetime, timedelta, timezone
solution, newest = sys.argv[5], datetime.now(timezone.utc) - timedelta(seconds=1)
for k in range(100):  # newer than her submission, a few seconds old
    when = newest - timedelta(milliseconds=k)
    plant(f"{alice}+backprop_ninja+{when:%Y-%m-%d %H:%M:%S.%f} UTC+l{k}", link=solution)
"""
)


def _stamp() -> str:
    from datetime import datetime, timezone

    return f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M:%S.%f} UTC"


@pytest.fixture(scope="module")
def exchange_run(accounts, new_course):
    """The course, with a collect after bob's and alice's real submissions and alice's
    planted folders; returns a dict of what was seen."""
    base = Path(tempfile.mkdtemp(prefix="bn-users-course-", dir="/tmp"))
    try:
        os.chmod(base, 0o711)
        course = new_course(base / "course")
        for entry in course.iterdir():  # the students reach exchange/ only (source/ has the solutions)
            if entry.name != "exchange":
                os.chmod(entry, 0o700 if entry.is_dir() else 0o600)
        os.chmod(course, 0o711)
        nbgrader(course, "release_assignment", spec.ASSIGNMENT)
        alice, bob = accounts["alice"], accounts["bob"]
        work = {name: _student(name, course) for name in (alice, bob)}
        answered = fill(
            nbformat.read(work[bob] / NB, 4), reference_answers(nbformat.read(course / "source" / NB, 4))
        )
        nbformat.write(answered, work[bob] / NB)
        for name in (bob, alice):
            as_user(name, "nbgrader", "submit", spec.ASSIGNMENT, cwd=work[name])
        inbound = course / "exchange" / "backprop_ninja" / "inbound"
        real = {
            name: next(p.name for p in inbound.iterdir() if p.name.startswith(f"{name}+"))
            for name in (alice, bob)
        }
        args = [str(inbound), str(work[alice] / NB), bob, alice]
        as_user(alice, sys.executable, "-c", PLANT_FIRST, *args, _stamp(), cwd=work[alice])
        first = nbgrader(course, "collect", spec.ASSIGNMENT)
        seen = {"course": course, "work": work, "real": real, "first": first.stdout + first.stderr}
        seen["collected"] = {n: (course / "submitted" / n / NB).read_bytes() for n in (alice, bob)}
        seen["stamps"] = {
            n: (course / "submitted" / n / spec.ASSIGNMENT / "timestamp.txt").read_text()
            for n in (alice, bob)
        }
        seen["os"] = _what_alice_can_do(alice, inbound / real[bob], work[alice])
        as_user(alice, sys.executable, "-c", PLANT_LINKS, *args, str(course / "source" / NB), cwd=work[alice])
        second = nbgrader(course, "collect", "--update", spec.ASSIGNMENT)
        seen["second"] = second.stdout + second.stderr
        seen["after"] = (course / "submitted" / alice / NB).read_bytes()
        yield seen
    finally:
        shutil.rmtree(base, ignore_errors=True)


TRY = """
import os, sys
inbound, bobs = sys.argv[1:3]
for what, do in (("list", lambda: os.listdir(inbound)), ("rename", lambda: os.rename(bobs, bobs + "-gone"))):
    try:
        do()
        print(what, "done")
    except PermissionError:
        print(what, "refused")
"""


def _what_alice_can_do(alice: str, bobs: Path, cwd: Path) -> str:
    return as_user(alice, sys.executable, "-c", TRY, str(bobs.parent), str(bobs), cwd=cwd).stdout


def test_bobs_real_submission_is_collected_not_alices_forgery(exchange_run, accounts):
    bob = accounts["bob"]
    assert exchange_run["collected"][bob] == (exchange_run["work"][bob] / NB).read_bytes()
    stamp = exchange_run["real"][bob].split("+")[2]
    assert exchange_run["stamps"][bob] == stamp and "2099" not in stamp
    log = exchange_run["first"]
    assert (
        f"REFUSED inbound/'{bob}+backprop_ninja+{FUTURE}+x' (owner {accounts['alice']}): named for {bob}"
        in log
    )


def test_alices_future_folder_is_ignored_and_her_real_one_collected(exchange_run, accounts):
    alice = accounts["alice"]
    assert exchange_run["collected"][alice] == (exchange_run["work"][alice] / NB).read_bytes()
    assert exchange_run["stamps"][alice] == exchange_run["real"][alice].split("+")[2]
    assert (
        f"'{alice}+backprop_ninja+{FUTURE}+z' (owner {alice}): dated 2099-01-01 00:00:00 UTC, in the future"
        in (exchange_run["first"])
    )


def test_a_flood_is_a_few_lines(exchange_run, accounts):
    refused = [line for line in exchange_run["first"].splitlines() if "REFUSED" in line]
    assert len(refused) == 2, refused  # one per kind: 2002 in bob's name, 1 in the future
    assert "and 2001 more such folders of " + accounts["alice"] in refused[0] + refused[1]


def test_links_to_the_solution_are_refused_and_only_the_latest_20_looked_at(exchange_run, accounts):
    alice = accounts["alice"]
    assert exchange_run["after"] == exchange_run["collected"][alice]
    assert b"BEGIN SOLUTION" not in exchange_run["after"]
    log = exchange_run["second"]
    assert log.count("backprop_ninja.ipynb: a link") == 20
    assert f"{alice}: every folder looked at was refused; submitted/ keeps the submission it had" in log
    assert "and 80 more such folders of " + alice in log  # 80 older link folders and her real one: 81


def test_alice_cannot_list_inbound_or_move_bobs_folder(exchange_run):
    assert exchange_run["os"].split() == ["list", "refused", "rename", "refused"]


def test_no_student_process_is_left(exchange_run, accounts):
    uids = {pwd.getpwnam(n).pw_uid for n in accounts.values()}
    assert processes_of(uids) == []
