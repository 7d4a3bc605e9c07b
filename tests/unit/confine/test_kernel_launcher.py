"""The cold kernel's launcher (grader/confine/kernel.py) ends with the grading process that
started it, whatever kills that process: no kernel outlives its grading."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from grader.confine import bwrap_works, make_kernel_dir

pytestmark = [pytest.mark.integration, pytest.mark.skipif(not bwrap_works(), reason="needs bubblewrap")]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(")")[-1].split()[0] != "Z"


def test_the_launcher_dies_with_a_killed_grading_process(tmp_path):
    home = make_kernel_dir(str(tmp_path))
    conn = tmp_path / "kernel.json"
    ports = {
        p: i + 1 for i, p in enumerate(("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port"))
    }
    conn.write_text(json.dumps({"transport": "ipc", "ip": str(home / "ipc" / "kernel"), "key": "k", **ports}))
    work = tmp_path / "work"
    work.mkdir()
    # a stand-in grading process: starts the launcher as jupyter_client would, then is SIGKILLed
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, sys, time\n"
            "cmd = [sys.executable, '-I', '-m', 'grader.confine', 'kernel', '-f', sys.argv[1]]\n"
            "p = subprocess.Popen(cmd)\n"
            "print(p.pid, flush=True)\ntime.sleep(600)",
            str(conn),
        ],
        cwd=work,
        stdout=subprocess.PIPE,
        text=True,
    )
    launcher = int(parent.stdout.readline())
    time.sleep(1.0)
    assert _alive(launcher)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 20
    while _alive(launcher) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(launcher)
