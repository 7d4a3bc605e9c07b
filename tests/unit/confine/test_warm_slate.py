"""Each kernel, warm or cold, starts from a clean slate (issue 17, point 1): its own fresh /tmp,
which is HOME, so its own IPython and matplotlib folders and user site; nothing a kernel before
it wrote, even in a folder made read-only. A warm kernel still sees what the sandbox mounts
under /tmp (a kit or virtualenv kept there); a server that cannot give a kernel its fresh /tmp
refuses it, and the kernel starts cold."""

from __future__ import annotations

import dataclasses
import os
import re
import sys
import textwrap
from pathlib import Path

import pytest
from jupyter_client import KernelManager
from test_warm import Kernel

from grader.confine import bwrap, default_sandbox, make_kernel_dir, warm
from grader.confine.bwrap import PACKAGE, VISIBLE_INSIDE, Sandbox
from grader.confine.warm import WarmProvisioner, WarmServer

import footholds

pytestmark = [pytest.mark.integration, pytest.mark.skipif(not bwrap.bwrap_works(), reason="needs bubblewrap")]
KIT_UNDER_TMP = "/tmp/bn-clean-clone/kit"  # as a clean clone of the kit under /tmp would put it
SPEC = "backprop-ninja-sandbox"

# What the kernel after an attacker reports: every start-up of the probe, what IPython and
# matplotlib would read, and the files in HOME.
LOOK = (
    footholds.PROBE
    + "import IPython, matplotlib\n"
    + "_result = {'probe': _seen, 'files': _n, 'home': os.environ['HOME'], 'pid': os.getpid(),\n"
    + " 'ipython_dir': get_ipython().ipython_dir, 'mpl': matplotlib.get_configdir(),\n"
    + " 'startup': os.listdir(get_ipython().profile_dir.startup_dir),\n"
    + " 'history': str(get_ipython().history_manager.hist_file),\n"
    + " 'tmp': sorted(os.listdir('/tmp')), 'env': sorted(os.environ)}\n"
)
# every foothold at once; what it printed (its self-checks) is the cell's result
PLANT_ALL = (
    "import contextlib as _c, io as _io\n_out = _io.StringIO()\nwith _c.redirect_stdout(_out):\n"
    + textwrap.indent("".join(footholds.plant(kind, f"k1-{kind}") for kind in footholds.KINDS), "    ")
    + "_result = _out.getvalue()\n"
)


def _assert_planted(out: str) -> None:
    """Each foothold worked in the kernel that planted it: its own start read the file."""
    checks = dict(
        re.findall(rf"{footholds.MARK} self-check (k1-\w+):(.*?)(?={footholds.MARK} planted|$)", out, re.S)
    )
    assert set(checks) == {f"k1-{kind}" for kind in footholds.KINDS}, out
    for tag, text in checks.items():
        assert tag in text, (tag, text)


@pytest.fixture
def stage(tmp_path) -> Path:
    root = tmp_path / "autograded"
    for student in ("ann", "ben"):
        (root / student / "backprop_ninja").mkdir(parents=True)
        (root / student / "backprop_ninja" / "names.txt").write_text(f"{student}\n")
    return root


def _assert_clean(seen: dict) -> None:
    assert seen["probe"] == [], seen["probe"]  # nothing an attacker left ran or was found
    assert seen["home"] == "/tmp"
    assert seen["ipython_dir"] == "/tmp/.ipython" and seen["startup"] == ["README"], seen
    assert seen["mpl"].startswith("/tmp/"), seen["mpl"]
    assert seen["history"] == ":memory:"  # the kernel's own history (protocol.KERNEL_OPTIONS)
    unset = {"IPYTHONDIR", "MPLCONFIGDIR", "PYTHONUSERBASE", "XDG_CONFIG_HOME", "PYTHONSTARTUP"}
    assert not unset & set(seen["env"]), seen["env"]


def test_a_warm_kernel_finds_nothing_an_earlier_one_planted(stage):
    """The issue's attack and its kin: a kernel plants an IPython startup file, a .bashrc, a
    matplotlibrc and site/usercustomize in HOME and locks their folders 0555; its own starts
    run them. The next kernel of the same server runs none and finds none."""
    server = WarmServer(stage=stage)
    try:
        first = Kernel(server, stage / "ann" / "backprop_ninja")
        try:
            _assert_planted(first.run(PLANT_ALL))
        finally:
            first.stop()
        second = Kernel(server, stage / "ben" / "backprop_ninja")
        try:
            seen = second.run(LOOK)
        finally:
            second.stop()
    finally:
        server.close()
    _assert_clean(seen)
    assert seen["pid"] == 1  # a warm kernel: PID 1 of its own namespaces
    # on its fresh /tmp, only the mount points the sandbox put there: the stage, the sockets, and
    # the kit and its Python where they live under /tmp (a clone at /tmp/ci2 in CI's own runs)
    kit = {Path(p).resolve().parts[2] for p in (PACKAGE, sys.prefix) if Path(p).resolve().parts[1] == "tmp"}
    assert set(seen["tmp"]) <= {".ipython", stage.parts[2], server.home.name, ".cache", ".config"} | kit, seen


def test_a_warm_kernel_can_write_only_to_its_own_fresh_mounts_and_its_sockets(stage):
    """Every other mount of the server's namespace is read-only in the kernel: where bubblewrap
    runs without root, its root, /dev and /run would be the kernel's user's, and shared."""
    server = WarmServer(stage=stage)
    try:
        k = Kernel(server, stage / "ann" / "backprop_ninja")
        try:
            seen = k.run(
                "import os\n_top = {}\n"
                "for _l in open('/proc/self/mountinfo'):\n"
                "    _f = _l.split()\n"
                "    _top[_f[4]] = (_f[5].split(','), _f[_f.index('-', 6) + 1])\n"
                "_pseudo = {'proc', 'sysfs', 'devpts', 'devtmpfs', 'mqueue'}  # processes, devices\n"
                "_result = sorted(p for p, (o, kind) in _top.items() if 'rw' in o and kind not in _pseudo)\n"
            )
        finally:
            k.stop()
    finally:
        server.close()
    assert seen == sorted(["/tmp", "/dev/shm", str(stage), str(server.ipc), "/run/kernel-ipc"]), seen


def test_a_cold_kernel_finds_nothing_an_earlier_one_planted(tmp_path, monkeypatch):
    """Cold kernels need nothing of the warm server's: bubblewrap gives each a /tmp of its own
    (--tmpfs /tmp), so also its own HOME, IPython folder and user site."""
    monkeypatch.setenv("JUPYTER_PATH", str(Path(bwrap.__file__).parent / "jupyter"))
    seen = []
    for code in (PLANT_ALL, LOOK):
        work = tmp_path / f"work{len(seen)}"
        work.mkdir()
        home = make_kernel_dir(str(tmp_path))
        km = KernelManager(kernel_name=SPEC, transport="ipc", ip=str(home / "ipc" / "kernel"))
        km.start_kernel(cwd=str(work), env=dict(os.environ, NBGRADER_EXECUTION="autograde"))
        k = Kernel.__new__(Kernel)
        k.km, k.kc = km, km.client()
        k.kc.start_channels()
        try:
            k.kc.wait_for_ready(timeout=120)
            seen.append(k.run(code))
        finally:
            k.stop()
    _assert_planted(seen[0])
    _assert_clean(seen[1])
    assert seen[1]["pid"] != 1  # a cold kernel (bubblewrap's init is PID 1)


class KitUnderTmp(Sandbox):
    """The sandbox, with the kit's files also bound under /tmp, as bwrap.py binds them for a kit
    kept there (a folder each, one file)."""

    def command(self, argv, *, readonly=None, **kwargs):
        kit = {str(PACKAGE / name): f"{KIT_UNDER_TMP}/grader/{name}" for name in VISIBLE_INSIDE}
        return super().command(argv, readonly={**(readonly or {}), **kit}, **kwargs)


def test_the_kit_bound_under_tmp_stays_importable_and_read_only(stage, monkeypatch):
    monkeypatch.setattr(warm, "default_sandbox", lambda: KitUnderTmp(default_sandbox().limits))
    server = WarmServer(stage=stage)
    use = (
        "import os, subprocess, sys\n"
        f"_kit = {KIT_UNDER_TMP!r}\n"
        "_r = subprocess.run([sys.executable, '-I', '-c', 'import sys; sys.path.insert(0, sys.argv[1]); "
        "import grader.untrusted.isolation as m, grader.exercise as e; print(m.__file__, e.__file__)', _kit],"
        " capture_output=True, text=True)\n"
        "def _writes(p):\n"
        "    try:\n        open(p, 'a').close(); return True\n"
        "    except OSError:\n        return False\n"
        "_result = [_r.stdout.split(), _r.stderr[-300:], _writes(_kit + '/grader/incell.py'),\n"
        "  _writes(_kit + '/grader/untrusted/x.py'), os.path.exists(_kit + '/grader/left.txt')]\n"
        "open(_kit + '/grader/left.txt', 'w').write('left by a kernel')  # beside the mounts: its /tmp\n"
    )
    try:
        seen = []
        for student in ("ann", "ben"):
            k = Kernel(server, stage / student / "backprop_ninja")
            try:
                seen.append(k.run(use))
            finally:
                k.stop()
    finally:
        server.close()
    for files, err, *_ in seen:
        assert files == [
            f"{KIT_UNDER_TMP}/grader/untrusted/isolation.py",
            f"{KIT_UNDER_TMP}/grader/exercise/__init__.py",
        ], err
    assert [s[2:] for s in seen] == [[False, False, False]] * 2  # read-only; the next kernel saw no file


def test_a_server_that_cannot_give_a_fresh_tmp_refuses_and_the_kernel_starts_cold(stage, monkeypatch, capfd):
    """A tmpfs the kernel's namespace cannot mount (an invalid size here): the server forks no
    kernel but says why; the grading process starts that kernel cold, and no other warm one."""
    monkeypatch.setenv("JUPYTER_PATH", str(Path(bwrap.__file__).parent / "jupyter"))
    monkeypatch.setattr(warm, "_REFUSED", None)
    server = WarmServer(stage=stage)
    server.limits = dataclasses.replace(server.limits, tmp_mb=-1)
    monkeypatch.setattr(warm, "_SERVER", server)
    try:
        km = KernelManager(kernel_name=SPEC, transport="ipc", ip=str(server.ipc / "kernel"))
        km.provisioner = WarmProvisioner(kernel_id="test", kernel_spec=km.kernel_spec, parent=km)
        km.provisioner.server = server
        km.start_kernel(cwd=str(stage / "ann" / "backprop_ninja"), env=dict(os.environ))
        k = Kernel.__new__(Kernel)
        k.km, k.kc = km, km.client()
        k.kc.start_channels()
        try:
            k.kc.wait_for_ready(timeout=120)
            seen = k.run("import os\n_result = [os.getpid(), open('names.txt').read()]")
        finally:
            k.stop()
        assert server.refused and "mount b'/tmp'" in server.refused, server.refused
        assert seen[0] != 1 and seen[1] == "ann\n"  # cold, in the student's folder
        assert "clean slate" in capfd.readouterr().err
        cwd = str(stage / "ben" / "backprop_ninja")
        assert warm.warm_server(cwd=cwd, runtime_root=None) is None and warm._REFUSED
    finally:
        server.close()


def test_what_a_kernel_leaves_among_its_sockets_goes_before_the_next(stage):
    """The socket folder is the only folder a warm kernel can write that the next one also sees:
    the grading process empties it, read-only folders and links included (never followed)."""
    server = WarmServer(stage=stage)
    outside = stage.parent / "outside.txt"
    outside.write_text("kept")
    try:
        k = Kernel(server, stage / "ann" / "backprop_ninja")
        try:
            k.run(
                f"import os\n_d = {str(server.ipc)!r} + '/locked/deeper'\nos.makedirs(_d)\n"
                "open(_d + '/f', 'w').write('x')\nos.chmod(_d, 0o555)\nos.chmod(os.path.dirname(_d), 0o555)\n"
                f"os.symlink({str(outside)!r}, {str(server.ipc)!r} + '/link')\n_result = 0\n"
            )
        finally:
            k.stop()
        assert {"locked", "link"} <= set(os.listdir(server.ipc))
        again = Kernel(server, stage / "ben" / "backprop_ninja")
        try:
            left = again.run(f"import os\n_result = sorted(os.listdir({str(server.ipc)!r}))")
        finally:
            again.stop()
    finally:
        server.close()
    assert "locked" not in left and "link" not in left, left
    assert outside.read_text() == "kept"
