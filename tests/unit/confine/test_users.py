"""grader/confine/users.py: each sandbox a uid of its own, held while it lives (root only)."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from grader.confine import users

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="only root hands out uids")


def private_pool(monkeypatch, count: int) -> None:
    """A pool of `count` uids right past the one sandboxes use: a grading process that runs
    meanwhile (another test's, on the other core) holds uids of its own pool, never these."""
    monkeypatch.setattr(users, "FIRST_UID", users.FIRST_UID + users.COUNT)
    monkeypatch.setattr(users, "COUNT", count)


def test_two_sandboxes_never_share_a_uid_and_a_released_one_is_free_again(monkeypatch):
    private_pool(monkeypatch, 2)
    a, b = users.claim(), users.claim()
    assert a.uid != b.uid and {a.uid, b.uid} <= set(users.uid_range())
    with pytest.raises(RuntimeError, match="no free sandbox user"):
        users.claim()
    a.close()
    assert users.claim().uid == a.uid
    b.close()


@pytest.mark.integration
def test_a_uid_that_still_has_processes_is_not_handed_out(monkeypatch):
    private_pool(monkeypatch, 1)
    uid = users.FIRST_UID
    sleeper = subprocess.Popen(
        ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "sleep", "30"]
    )
    try:
        for _ in range(100):  # until setpriv has changed user
            if os.stat(f"/proc/{sleeper.pid}").st_uid == uid:
                break
            time.sleep(0.02)
        with pytest.raises(RuntimeError):
            users.claim()
    finally:
        sleeper.kill()
        sleeper.wait()
    users.claim().close()
