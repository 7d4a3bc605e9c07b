"""grader/replay/client.py against fake replay servers (a few lines of Python, no torch): an
answer counts only if it is the answer to the request just sent; a server that says anything
else is killed and not trusted again. The real server: tests/e2e/test_replay_isolation.py."""

from __future__ import annotations

import subprocess
import sys
import time

from grader.replay.client import SERVER_COMMAND, ReplayServer


def test_the_server_is_the_untrusted_package_in_isolated_mode():
    assert SERVER_COMMAND[1:] == ["-I", "-m", "grader.untrusted.server"]


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
    status, frame, _ = server.replay(tmp_path, run="main", names_txt=names, timeout=5)
    assert status.startswith("the replay server stopped") and frame is None
    assert server.proc is None  # killed: it is not trusted again


def test_an_extra_answer_is_noticed_before_the_next_request(tmp_path):
    body = (
        'print(json.dumps({"nonce": req["nonce"], "status": "ok", "size": 0}))\n'
        '    print(json.dumps({"nonce": req["nonce"], "status": "ok", "size": 0}), flush=True)'
    )
    server, names = _server(tmp_path, body)
    assert server.replay(tmp_path, run="main", names_txt=names, timeout=5)[:2] == ("ok", None)
    first = server.proc
    time.sleep(0.2)
    assert server.replay(tmp_path, run="ex3", names_txt=names, timeout=5)[:2] == ("ok", None)
    assert server.proc is not first  # restarted: the stray line was never taken as an answer
    server.close()


def test_an_oversized_answer_is_refused(tmp_path):
    body = 'print(json.dumps({"nonce": req["nonce"], "status": "ok", "size": 10**12}), flush=True)'
    server, names = _server(tmp_path, body)
    status, frame, _ = server.replay(tmp_path, run="main", names_txt=names, timeout=5)
    assert "malformed" in status and frame is None
