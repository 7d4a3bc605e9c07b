"""Warm kernels (grader/confine/warm.py, grader/untrusted/zygote.py): a real server in a real
sandbox forks real IPython kernels, driven by jupyter_client as nbclient drives them. Each
kernel must look like a cold one from inside and keep nothing from the one before."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
from jupyter_client import KernelManager

from grader.confine import bwrap_works
from grader.confine.bwrap import inside_environment
from grader.confine.warm import WarmProvisioner, WarmServer

pytestmark = [pytest.mark.integration, pytest.mark.skipif(not bwrap_works(), reason="needs bubblewrap")]


@pytest.fixture(scope="module")
def stage(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("course") / "autograded"
    for student in ("ann", "ben"):
        folder = root / student / "backprop_ninja"
        folder.mkdir(parents=True)
        (folder / "names.txt").write_text(f"{student}\n")
        (folder / "sub").mkdir()
        (folder / "sub" / "notes.txt").write_text("x")
    return root


@pytest.fixture(scope="module")
def server(stage):
    s = WarmServer(stage=stage)
    yield s
    s.close()


class Kernel:
    """One warm kernel through jupyter_client, and a way to run code in it."""

    def __init__(self, server: WarmServer, cwd: Path):
        self.km = KernelManager(kernel_name="python3", transport="ipc", ip=str(server.ipc / "kernel"))
        self.km.provisioner = WarmProvisioner(
            kernel_id="test", kernel_spec=self.km.kernel_spec, parent=self.km
        )
        self.km.provisioner.server = server
        self.km.start_kernel(cwd=str(cwd), env=dict(os.environ, NBGRADER_EXECUTION="autograde"))
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)

    def run(self, code: str):
        """The value of the code's last line, through JSON."""
        out = []
        reply = self.kc.execute_interactive(
            code + "\nimport json as _j; print('@@' + _j.dumps(_result))",
            timeout=60,
            output_hook=lambda m: out.append(m["content"].get("text", "")),
        )
        assert reply["content"]["status"] == "ok", reply["content"]
        line = [x for x in "".join(out).splitlines() if x.startswith("@@")][-1]
        return json.loads(line[2:])

    def stop(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel()


def test_a_warm_kernel_looks_like_a_cold_one_from_inside(server, stage):
    cwd = stage / "ann" / "backprop_ninja"
    k = Kernel(server, cwd)
    try:
        seen = k.run(
            "import os, sys, resource\n"
            "_lim = lambda r: resource.getrlimit(r)[0]\n"
            "_result = {'cwd': os.getcwd(), 'files': sorted(os.listdir('.')), 'pid': os.getpid(),\n"
            " 'env': dict(os.environ), 'torch_ready': 'torch' in sys.modules,\n"
            " 'nproc': _lim(resource.RLIMIT_NPROC), 'cpu': _lim(resource.RLIMIT_CPU),\n"
            " 'names': open('names.txt').read(), 'nested': open('sub/notes.txt').read(),\n"
            " 'path0': sys.path[0]}"
        )
    finally:
        k.stop()
    assert seen["cwd"] == str(cwd)
    assert seen["files"] == [".kernel-connection.json", "names.txt", "sub"]
    assert (seen["names"], seen["nested"]) == ("ann\n", "x")
    assert seen["pid"] == 1  # PID 1 of a namespace of its own
    expected = inside_environment({"NBGRADER_EXECUTION": "autograde"})
    assert {k: seen["env"].get(k) for k in expected} == expected
    ipython_sets = {
        "CLICOLOR",
        "CLICOLOR_FORCE",
        "FORCE_COLOR",
        "GIT_PAGER",
        "PAGER",
        "TERM",
        "PYDEVD_USE_FRAME_EVAL",
    }
    assert set(seen["env"]) - set(expected) <= ipython_sets, set(seen["env"]) - set(expected)
    assert seen["torch_ready"]  # the point of it: imported before the kernel existed
    assert (seen["nproc"], seen["cpu"]) == (server.limits.processes, server.limits.cpu_seconds)
    assert seen["path0"] == str(cwd)


THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")


@pytest.mark.skipif(
    not THP.exists() or "[never]" in THP.read_text(), reason="this kernel gives no transparent huge pages"
)
def test_a_warm_kernels_heap_is_on_huge_pages(server, stage):
    """Where THP is given on request ("madvise", as here) the sandbox asks for it (bwrap.py's
    GLIBC_TUNABLES, and the THP settings glibc reads first): the zygote's heap, torch's, and so a
    forked kernel's, is on huge pages, which each fork copies and tears down in a few entries."""
    k = Kernel(server, stage / "ann" / "backprop_ninja")
    try:
        rollup = k.run("_result = open('/proc/self/smaps_rollup').read()")
    finally:
        k.stop()
    huge_kb = int(rollup.split("AnonHugePages:")[1].split()[0])
    assert huge_kb >= 2048, rollup


def test_nothing_of_one_kernel_reaches_the_next(server, stage):
    first = Kernel(server, stage / "ann" / "backprop_ninja")
    try:
        first.run(
            "import subprocess, os\n"
            "open('/tmp/secret', 'w').write('ann'); open('secret', 'w').write('ann')\n"
            "subprocess.Popen(['sleep', '600'], start_new_session=True)\n"
            "subprocess.run(['sh', '-c', '(sleep 600 &)'])  # a daemon: its parent gone at once\n"
            "_result = 0\n"
        )
    finally:
        first.stop()
    second = Kernel(server, stage / "ben" / "backprop_ninja")
    try:
        seen = second.run(
            "import os\n_result = [os.path.exists('/tmp/secret'), os.path.exists('secret'), "
            "open('names.txt').read(), os.path.exists('../../ann')]"
        )
    finally:
        second.stop()
    assert seen == [False, False, "ben\n", False]
    assert not _processes_of(server, "sleep")  # the daemon died with its kernel


def test_the_server_is_out_of_a_kernels_reach(server, stage):
    k = Kernel(server, stage / "ann" / "backprop_ninja")
    try:
        seen = k.run(
            "import os\n"
            "def _try(f):\n"
            "    try:\n        f(); return 'reached'\n"
            "    except OSError as e:\n        return type(e).__name__\n"
            "_me = os.readlink('/proc/self')  # this kernel, as the server's namespace numbers it\n"
            "_zyg = [p for p in os.listdir('/proc')\n"
            "        if p.isdigit() and p != _me and 'zygote' in open(f'/proc/{p}/cmdline').read()]\n"
            "_result = [_try(lambda: open(f'/proc/{p}/environ').read()) for p in _zyg] + "
            "[_try(lambda: os.listdir(f'/proc/{p}/fd')) for p in _zyg] + [len(_zyg) >= 2]"
        )
    finally:
        k.stop()
    assert seen[-1] is True
    assert set(seen[:-1]) == {"PermissionError"}, seen  # the server and the kernel are not dumpable


def test_a_killed_kernel_is_reported_and_the_next_one_starts(server, stage):
    k = Kernel(server, stage / "ann" / "backprop_ninja")
    k.kc.execute("import time; time.sleep(600)")
    time.sleep(0.5)
    k.km.shutdown_kernel(now=True)
    deadline = time.monotonic() + 10
    while server.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.poll() == 128 + signal.SIGKILL
    k.kc.stop_channels()
    again = Kernel(server, stage / "ben" / "backprop_ninja")
    try:
        assert again.run("_result = open('names.txt').read()") == "ben\n"
    finally:
        again.stop()
    assert server.poll() == 0  # a clean shutdown, not a kill after a timeout


def _processes_of(server: WarmServer, name: str) -> list[int]:
    uid = os.stat(server.ipc).st_uid
    found = []
    for entry in os.listdir("/proc"):
        try:
            mine = entry.isdigit() and os.stat(f"/proc/{entry}").st_uid == uid
            if mine and Path(f"/proc/{entry}/comm").read_text().strip() == name:
                found.append(int(entry))
        except OSError:
            pass
    return found
