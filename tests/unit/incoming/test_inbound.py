"""inbound.py, SafeCollect's rules: which folders of inbound/ may be a student's submission (owner,
times, the latest few), the copy that takes only its owner's regular files, and the log's bounded
lines. Real folders where the file system decides; other accounts' files need root (chown)."""

from __future__ import annotations

import os
from datetime import datetime, timedelta

import pytest

from grader.incoming import inbound
from grader.incoming.inbound import Folder, Refused

NOW = datetime(2026, 3, 1, 12, 0, 0)
ME = inbound.account(os.getuid())


def folder(
    student="bob", when=NOW - timedelta(hours=1), owner=None, made=None, is_dir=True, name=None
) -> Folder:
    stamp = f"{when:%Y-%m-%d %H:%M:%S.%f} UTC" if when else "yesterday"
    return Folder(
        name or f"{student}+backprop_ninja+{stamp}+r",
        student,
        stamp,
        when,
        1000,
        owner or student,
        made or (when or NOW) + timedelta(seconds=1),
        is_dir,
    )


def reasons(plan) -> dict[str, str]:
    return {r.name: r.reason for r in plan.refused}


def test_only_the_owner_counts():
    bob = folder("bob")
    forged = folder("bob", when=NOW - timedelta(minutes=1), owner="alice", name="bob+backprop_ninja+forged+x")
    plan = inbound.plan([bob, forged], now=NOW)
    assert plan.tries == {"bob": [bob]}
    assert reasons(plan) == {forged.name: "named for bob but made by alice"}
    assert inbound.plan([forged], now=NOW, check_owner=False).tries == {"bob": [forged]}


def test_times_from_the_future_are_refused():
    future = folder("bob", when=datetime(2099, 1, 1))
    after = folder("bob", when=NOW - timedelta(hours=1), made=NOW - timedelta(hours=2), name="b2")
    soon = folder("bob", when=NOW + timedelta(minutes=1), made=NOW + timedelta(minutes=1), name="b3")
    odd = folder("bob", when=None, name="bob+backprop_ninja+yesterday")
    plan = inbound.plan([future, after, soon, odd], now=NOW)
    assert plan.tries == {"bob": [soon]}  # within FUTURE_SLACK: clocks of several machines
    assert reasons(plan) == {
        future.name: "dated 2099-01-01 00:00:00 UTC, in the future",
        "b2": "dated 2026-03-01 11:00:00 UTC, after its folder was made (2026-03-01 10:00:00)",
        odd.name: "'yesterday' is not a time",
    }


def test_not_folders_and_odd_ids_are_refused():
    plan = inbound.plan([folder("bob", is_dir=False), folder("..", owner="..")], now=NOW, check_owner=False)
    assert plan.tries == {} and sorted(r.kind for r in plan.refused) == ["not a folder", "not a student id"]


def test_only_the_latest_are_looked_at():
    many = [folder("bob", when=NOW - timedelta(minutes=k)) for k in range(1, 31)]
    plan = inbound.plan(many, now=NOW, per_student=20)
    assert plan.tries["bob"] == many[:20]
    assert [r.kind for r in plan.refused] == ["not looked at"] * 10
    assert plan.refused[0].reason == "not looked at: older than bob's latest 20"


def test_before_duedate_puts_those_before_it_first():
    late, early, earlier = (folder("bob", when=NOW - timedelta(hours=h), name=str(h)) for h in (1, 5, 9))
    plan = inbound.plan(
        [earlier, late, early], now=NOW, duedate=NOW - timedelta(hours=3), before_duedate=True
    )
    assert plan.tries["bob"] == [early, earlier, late]
    assert inbound.plan([earlier, late, early], now=NOW).tries["bob"] == [late, early, earlier]


def test_a_flood_is_a_few_lines_of_the_log():
    flood = [folder("bob", when=NOW - timedelta(seconds=k), owner="alice") for k in range(5000)]
    flood += [
        folder("bob", when=datetime(2099, 1, 1), owner="alice"),
        folder("alice", when=datetime(2099, 1, 1)),
    ]
    lines = inbound.summarise(inbound.plan(flood, now=NOW).refused)
    assert lines == [
        "REFUSED inbound/'bob+backprop_ninja+2099-01-01 00:00:00.000000 UTC+r' (owner alice): "
        "named for bob but made by alice; and 5000 more such folders of alice",
        "REFUSED inbound/'alice+backprop_ninja+2099-01-01 00:00:00.000000 UTC+r' (owner alice): "
        "dated 2099-01-01 00:00:00 UTC, in the future",
    ]


def test_time_kept_is_when_the_files_last_changed_if_much_later():
    f = folder("bob")
    assert inbound.time_kept(f, f.when + timedelta(seconds=30)) == (f.when, "")
    later = f.when + timedelta(hours=2)
    when, note = inbound.time_kept(f, later)
    assert when == later and "its files changed at 2026-03-01 13:00:00 UTC: the latter is its time" in note


# ---------------------------------------------------------------- real folders
@pytest.fixture
def box(tmp_path):
    """An inbound/ folder, open; yields (path, fd)."""
    path = tmp_path / "inbound"
    path.mkdir()
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    yield path, fd
    os.close(fd)


def submission(box, name=f"{ME}+backprop_ninja+2026-03-01 10:00:00.000000 UTC+r") -> Folder:
    path, fd = box
    (path / name / "sub").mkdir(parents=True)
    (path / name / "backprop_ninja.ipynb").write_text("{}")
    (path / name / "sub" / "names.txt").write_text("emma\n")
    return next(f for f in inbound.read_inbound(fd, "backprop_ninja") if f.name == name)


def test_read_inbound_reads_names_and_owners(box):
    path, fd = box
    mine = submission(box)
    (path / "x+other_assignment+2026-03-01 10:00:00 UTC+r").mkdir()
    (path / "junk").mkdir()
    (path / "bob+backprop_ninja+2026-03-01 10:00:00 UTC").symlink_to(path / mine.name)
    got = {f.name: f for f in inbound.read_inbound(fd, "backprop_ninja")}
    assert sorted(got) == ["bob+backprop_ninja+2026-03-01 10:00:00 UTC", mine.name]
    link = got["bob+backprop_ninja+2026-03-01 10:00:00 UTC"]
    assert not link.is_dir and link.owner == ME  # the link itself, not what it points to
    assert mine.student == ME and mine.owner == ME and mine.when == datetime(2026, 3, 1, 10)
    assert [f.name for f in inbound.read_inbound(fd, "backprop_ninja", student="bob")] == [link.name]


def test_copy_owned_copies_files_and_folders(box, tmp_path):
    f = submission(box)
    changed = inbound.copy_owned(box[1], f, tmp_path / "copy", max_bytes=10_000)
    assert (tmp_path / "copy" / "backprop_ninja.ipynb").read_text() == "{}"
    assert (tmp_path / "copy" / "sub" / "names.txt").read_text() == "emma\n"
    assert abs(changed - datetime.utcnow()) < timedelta(minutes=1)


@pytest.mark.parametrize("where", ["top", "inside"])
def test_copy_owned_refuses_links(box, tmp_path, where):
    path, fd = box
    f = submission(box)
    secret = tmp_path / "solution.ipynb"
    secret.write_text("### BEGIN SOLUTION")
    at = path / f.name / ("backprop_ninja2.ipynb" if where == "top" else "sub/names2.txt")
    at.symlink_to(secret)
    with pytest.raises(Refused, match="a link"):
        inbound.copy_owned(fd, f, tmp_path / "copy", max_bytes=10_000)
    assert "SOLUTION" not in "".join(p.read_text() for p in (tmp_path / "copy").rglob("*") if p.is_file())


def test_copy_owned_refuses_a_fifo_a_size_and_a_count(box, tmp_path):
    path, fd = box
    f = submission(box)
    os.mkfifo(path / f.name / "pipe")
    with pytest.raises(Refused, match="neither a file nor a folder"):
        inbound.copy_owned(fd, f, tmp_path / "a", max_bytes=10_000)
    os.unlink(path / f.name / "pipe")
    with pytest.raises(Refused, match="more than 3 bytes"):
        inbound.copy_owned(fd, f, tmp_path / "b", max_bytes=3)
    with pytest.raises(Refused, match="more than 2 files and folders"):
        inbound.copy_owned(fd, f, tmp_path / "c", max_bytes=10_000, max_files=2)


def test_copy_owned_refuses_a_folder_that_is_a_link(box, tmp_path):
    path, fd = box
    real = tmp_path / "elsewhere"
    real.mkdir()
    (path / f"{ME}+backprop_ninja+2026-03-01 10:00:00 UTC+r").symlink_to(real, target_is_directory=True)
    (f,) = inbound.read_inbound(fd, "backprop_ninja")
    with pytest.raises(Refused, match="a link"):
        inbound.copy_owned(fd, f, tmp_path / "copy", max_bytes=10_000)


@pytest.mark.skipif(os.geteuid() != 0, reason="a file of another account needs root (chown)")
def test_copy_owned_refuses_another_accounts_file(box, tmp_path):
    path, fd = box
    f = submission(box)
    os.chown(path / f.name / "sub" / "names.txt", 4321, 4321)
    with pytest.raises(Refused, match=f"sub/names.txt belongs to uid 4321, not to {ME}"):
        inbound.copy_owned(fd, f, tmp_path / "copy", max_bytes=10_000)
