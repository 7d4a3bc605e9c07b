"""grader/confine/probe.py and the rule in bwrap.py: the sandbox check names the real reason
(not installed; installed but no namespaces, with bwrap's own words; a bwrap that exits
non-zero), and no launch runs student code without bubblewrap unless allowed; allowed, a
command has the sandbox's environment and nothing else of the grader's, its mappings are the
real folders or refused, and what is gone is said once per process; run by root, it still runs
as the sandbox's uid."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys

import pytest

from grader.confine import bwrap, probe, unconfined
from grader.confine.bwrap import Sandbox
from grader.confine.probe import SandboxUnavailable, Status

pytestmark = pytest.mark.integration  # starts processes: make integration

KIT_ARGS = ["--ro-bind", "/", "/"]  # the kit's own arguments matter only to the third step


def _fake(tmp_path, script: str):
    """A bwrap on PATH: `script` is the body of a shell script."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    exe = folder / "bwrap"
    exe.write_text("#!/bin/sh\n" + script)
    exe.chmod(0o755)
    return folder, exe


@pytest.fixture
def on_path(monkeypatch):
    def put(folder):
        monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")

    return put


def test_not_installed(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    status = probe.probe(KIT_ARGS)
    assert not status.works and status.reason.startswith("bubblewrap is not installed")


def test_a_bwrap_that_exits_1_is_named_with_its_exit_code(tmp_path, on_path):
    folder, exe = _fake(tmp_path, "exit 1\n")
    on_path(folder)
    status = probe.probe(KIT_ARGS)
    assert not status.works
    assert status.reason == f"{exe} does not work: `bwrap --version` exited 1 (no output)"
    assert "not installed" not in status.reason and "not available" not in status.reason


NO_NAMESPACES = """if [ "$1" = --version ]; then echo "bubblewrap 0.8.0"; exit 0; fi
echo "bwrap: Creating new namespace failed: Operation not permitted" >&2
exit 1
"""


def test_installed_but_no_namespaces_says_so_in_bwraps_words(tmp_path, on_path):
    folder, exe = _fake(tmp_path, NO_NAMESPACES)
    on_path(folder)
    reason = probe.probe(KIT_ARGS).reason
    assert reason.startswith(
        f"bubblewrap is installed ({exe}, bubblewrap 0.8.0) but cannot create namespaces"
    )
    assert "--unshare-pid --unshare-net" in reason
    assert reason.endswith("exited 1: bwrap: Creating new namespace failed: Operation not permitted")


def test_namespaces_but_not_the_kits_sandbox(tmp_path, on_path):
    script = (
        'case "$*" in *--version*) echo "bubblewrap 0.9.0";; *" true") exit 0;;\n'
        "*) echo nope >&2; exit 3;; esac\n"
    )
    folder, _ = _fake(tmp_path, script)
    on_path(folder)
    reason = probe.probe(KIT_ARGS).reason
    assert "creates namespaces, but the kit's sandbox exited 3: nope" in reason


def test_a_hanging_bwrap_is_a_failure_too(tmp_path, on_path, monkeypatch):
    folder, _ = _fake(tmp_path, "sleep 30\n")
    on_path(folder)
    monkeypatch.setattr(probe, "PROBE_SECONDS", 1)
    assert probe.probe(KIT_ARGS).reason.endswith("`bwrap --version` gave no answer in 1 s")


@pytest.mark.skipif(not shutil.which("bwrap"), reason="needs bubblewrap")
def test_the_real_bwrap_here():
    status = probe.probe(bwrap._base_args())
    assert status == bwrap.sandbox_status()
    if status.works:
        assert status.reason == ""


def test_check_prints_the_reason(tmp_path):
    folder, exe = _fake(tmp_path, "exit 1\n")
    env = dict(os.environ, PATH=f"{folder}{os.pathsep}{os.environ['PATH']}")
    done = subprocess.run(
        [sys.executable, "-m", "grader", "check"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (
        done.stdout.strip()
        == f"bubblewrap sandbox: NOT available: {exe} does not work: `bwrap --version` exited 1 (no output)"
    )


# ------------------------------------------------------------ the rule
@pytest.fixture
def broken(monkeypatch):
    monkeypatch.setattr(bwrap, "sandbox_status", lambda: Status(False, "a broken bwrap (exit 1)"))
    monkeypatch.setenv(probe.ALLOW_ENV, "")


def test_no_launch_without_the_sandbox_unless_allowed(broken):
    with pytest.raises(SandboxUnavailable) as e:
        Sandbox().command(["python"], writable={}, cwd="/tmp")
    assert e.value.reason == "a broken bwrap (exit 1)"
    assert str(e.value).startswith(
        "not graded: the sandbox could not start (a broken bwrap (exit 1)). Fix it"
    )
    assert probe.refused_reason(f"log line\n{e.value}\nmore") == "a broken bwrap (exit 1)"


@pytest.mark.parametrize(("value", "allowed"), [("1", True), ("true", True), ("", False), ("0", False)])
def test_allowed_by_the_environment(broken, monkeypatch, value, allowed):
    monkeypatch.setenv(probe.ALLOW_ENV, value)
    assert probe.unsandboxed_allowed() is allowed


def test_allowed_as_root_still_the_sandboxs_uid_and_environment(broken, monkeypatch):
    monkeypatch.setenv(probe.ALLOW_ENV, "1")
    monkeypatch.setenv("SECRET_TOKEN", "x")
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    cmd = Sandbox(uid=61234).command(["/bin/python", "-I"], writable={}, cwd="/run/x")
    assert cmd[:4] == ["env", "-i", "-C", "/run/x"]
    assert cmd[-8:] == [
        "setpriv",
        "--reuid=61234",
        "--regid=61234",
        "--clear-groups",
        "--no-new-privs",
        "--",
        "/bin/python",
        "-I",
    ]
    assert "HOME=/tmp" in cmd and not any(a.startswith("SECRET_TOKEN") for a in cmd)
    assert not any(a.startswith("BACKPROP_NINJA_") for a in cmd)  # the grader's switches stay out


def test_only_nbgrader_variables_pass_into_the_sandbox():
    outside = {"NBGRADER_EXECUTION": "autograde", probe.ALLOW_ENV: "1", "BACKPROP_NINJA_MEMORY_MB": "9"}
    inside = bwrap.inside_environment(outside, {"X": "y"})
    assert inside["NBGRADER_EXECUTION"] == "autograde" and inside["X"] == "y"
    assert not [k for k in inside if k.startswith("BACKPROP_NINJA_")]


def test_allowed_not_root_still_the_sandboxs_environment(broken, monkeypatch):
    monkeypatch.setenv(probe.ALLOW_ENV, "1")
    monkeypatch.setenv("SECRET_TOKEN", "x")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    cmd = Sandbox().command(["python", "-I"], writable={}, cwd="/tmp", env={"EXTRA": "1"})
    assert cmd[:4] == ["env", "-i", "-C", "/tmp"] and cmd[-2:] == ["python", "-I"]
    assert {"HOME=/tmp", "PATH=/usr/bin:/bin", "EXTRA=1"} <= set(cmd) and "setpriv" not in cmd
    assert not any(a.startswith(("SECRET_TOKEN", "BACKPROP_NINJA_")) for a in cmd)
    assert Sandbox().with_own_user() == (Sandbox(), None)


def test_allowed_the_environment_really_is_the_sandboxs(broken, monkeypatch, tmp_path):
    monkeypatch.setenv(probe.ALLOW_ENV, "1")
    monkeypatch.setenv("SECRET_TOKEN", "x")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    code = "import os, json; print(json.dumps([os.getcwd(), dict(os.environ)]))"
    cmd = Sandbox().command([sys.executable, "-I", "-c", code], writable={}, cwd=str(tmp_path))
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    cwd, env = json.loads(done.stdout)
    assert cwd == str(tmp_path) and "SECRET_TOKEN" not in env and env["HOME"] == "/tmp", done.stderr


def test_allowed_a_folder_mapped_elsewhere_is_refused_not_dropped(broken, monkeypatch):
    monkeypatch.setenv(probe.ALLOW_ENV, "1")
    with pytest.raises(ValueError, match="/srv/inbox as /run/submission"):
        Sandbox().command(["python"], writable={}, readonly={"/srv/inbox": "/run/submission"}, cwd="/")
    with pytest.raises(ValueError, match="/srv/ipc as /run/kernel-ipc"):
        Sandbox().command(
            ["python"], writable=[("/srv/ipc", "/srv/ipc"), ("/srv/ipc", "/run/kernel-ipc")], cwd="/"
        )


def test_allowed_what_is_gone_is_said_once_per_process(broken, monkeypatch, caplog):
    monkeypatch.setenv(probe.ALLOW_ENV, "1")
    monkeypatch.setattr(unconfined, "_said_gone", False)
    with caplog.at_level(logging.WARNING, logger="grader.confine.unconfined"):
        for _ in range(3):
            Sandbox().command(["python"], writable={}, readonly={"/srv/x": "/srv/x"}, cwd="/srv/x")
    said = [r.getMessage() for r in caplog.records if r.name == "grader.confine.unconfined"]
    assert len(said) == 1 and said[0].startswith(probe.WARNING)
    for gone in ("the folders mapped in are the real paths (here: /srv/x)", "the network is reachable"):
        assert gone in said[0]
    assert "no read-only system" in said[0] and "no private /tmp" in said[0]


def test_with_bubblewrap_nothing_is_said(monkeypatch, caplog):
    monkeypatch.setattr(bwrap, "sandbox_status", lambda: Status(True))
    monkeypatch.setattr(unconfined, "_said_gone", False)
    with caplog.at_level(logging.WARNING, logger="grader.confine.unconfined"):
        cmd = Sandbox().command(["python"], writable={}, readonly={"/srv/x": "/run/x"}, cwd="/")
    assert cmd[0] == "bwrap" and cmd[cmd.index("/srv/x") - 1 : cmd.index("/srv/x") + 2] == [
        "--ro-bind",
        "/srv/x",
        "/run/x",
    ]
    assert not caplog.records


@pytest.mark.skipif(os.geteuid() != 0, reason="leases uids: root only")
def test_allowed_as_root_a_uid_of_its_own(broken, monkeypatch):
    monkeypatch.setenv(probe.ALLOW_ENV, "1")
    sandbox, lease = Sandbox().with_own_user()
    try:
        assert lease is not None and sandbox.uid == lease.uid != 0
    finally:
        lease.close()
