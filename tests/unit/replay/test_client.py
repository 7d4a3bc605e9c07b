"""grader/replay/client.py against fake replay servers (a few lines of Python, no torch): an
answer counts only if it is the answer to the request just sent; a server that says anything
else is killed and not trusted again. The real server: tests/e2e/test_replay_isolation.py."""

from __future__ import annotations

import functools
import inspect
import subprocess
import sys
import time

import pytest

from grader.confine import Sandbox
from grader.replay import run
from grader.replay.client import SERVER_COMMAND, ReplayServer, launch_plain, launch_sandboxed
from grader.verdicts import judge

pytestmark = pytest.mark.integration  # starts processes: make integration


def test_the_server_is_the_untrusted_package_in_isolated_mode():
    assert SERVER_COMMAND[1:] == ["-I", "-m", "grader.untrusted.server"]


# ------------------------------------------------------------ the sandbox is the default
def test_the_replay_is_sandboxed_unless_a_caller_says_otherwise():
    for f in (run.run_replay, ReplayServer):
        assert inspect.signature(f).parameters["launcher"].default is launch_sandboxed, f
    assert inspect.signature(judge.judge_submission).parameters["launcher"].default is None


def _launcher_of_judge(monkeypatch, names_txt, **how):
    seen = []

    def replay(*args, launcher, **kwargs):
        seen.append(launcher)
        raise RuntimeError("enough")

    monkeypatch.setattr(judge, "run_replay", replay)
    monkeypatch.setattr(judge, "fresh_inputs", lambda *a: None)
    monkeypatch.setattr(judge, "dataset", lambda *a: None)
    try:
        judge.judge_submission(
            [], student="x", settings=judge.JudgeSettings(seed=1), names_txt=names_txt, **how
        )
    except RuntimeError:
        pass
    return seen[0]


def test_the_judge_runs_the_replay_in_the_sandbox_by_default(monkeypatch, tmp_path):
    launcher = _launcher_of_judge(monkeypatch, tmp_path)
    assert isinstance(launcher, functools.partial) and launcher.func is launch_sandboxed
    assert isinstance(launcher.keywords["sandbox"], Sandbox)
    mine = Sandbox(uid=61001)
    assert _launcher_of_judge(monkeypatch, tmp_path, sandbox=mine).keywords["sandbox"] is mine


def test_the_plain_launcher_only_when_passed(monkeypatch, tmp_path):
    assert _launcher_of_judge(monkeypatch, tmp_path, launcher=launch_plain) is launch_plain


def _fake_server(script: str):
    def launch(cmd):
        return subprocess.Popen(
            [sys.executable, "-c", script],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            start_new_session=True,
        )

    return launch


ANSWER = """
import json, sys
print(json.dumps({"ready": True}), flush=True)
sys.stdin.readline()
for line in sys.stdin:
    req = json.loads(line)
    %s
"""


def _server(tmp_path, body):
    server = ReplayServer([], _fake_server(ANSWER % body))
    names = tmp_path / "names.txt"
    names.write_text("emma\n")
    return server, names


def test_an_answer_with_another_nonce_is_refused(tmp_path):
    server, names = _server(
        tmp_path, 'print(json.dumps({"nonce": "forged", "status": "ok", "size": 0}), flush=True)'
    )
    status, frame, *_ = server.replay(tmp_path, run="main", data={"names.txt": names}, timeout=5)
    assert status.startswith("the replay server stopped") and frame is None
    assert server.proc is None  # killed: it is not trusted again


def test_an_extra_answer_is_noticed_before_the_next_request(tmp_path):
    body = (
        'print(json.dumps({"nonce": req["nonce"], "status": "ok", "size": 0}))\n'
        '    print(json.dumps({"nonce": req["nonce"], "status": "ok", "size": 0}), flush=True)'
    )
    server, names = _server(tmp_path, body)
    assert server.replay(tmp_path, run="main", data={"names.txt": names}, timeout=5)[:2] == ("ok", None)
    first = server.proc
    time.sleep(0.2)
    assert server.replay(tmp_path, run="ex3", data={"names.txt": names}, timeout=5)[:2] == ("ok", None)
    assert server.proc is not first  # restarted: the stray line was never taken as an answer
    server.close()


def test_an_oversized_answer_is_refused(tmp_path):
    body = 'print(json.dumps({"nonce": req["nonce"], "status": "ok", "size": 10**12}), flush=True)'
    server, names = _server(tmp_path, body)
    status, frame, *_ = server.replay(tmp_path, run="main", data={"names.txt": names}, timeout=5)
    assert "malformed" in status and frame is None


@pytest.mark.parametrize(
    "pace, taken",
    [("0.00021", 0.00021), ('"fast"', None), ("5.0", None), ("-0.001", None), ("1", None), ("None", None)],
)
def test_a_pace_is_taken_only_as_a_fraction_of_a_second(tmp_path, pace, taken):
    header = '{"nonce": req["nonce"], "status": "ok", "size": 0, "cpu": 0.5, "pace": %s}' % pace
    server, names = _server(tmp_path, f"print(json.dumps({header}), flush=True)")
    try:
        answer = server.replay(tmp_path, run="main", data={"names.txt": names}, timeout=5)
        assert answer == ("ok", None, 0.5, taken)
    finally:
        server.close()
