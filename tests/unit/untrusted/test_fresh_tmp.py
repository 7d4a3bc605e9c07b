"""isolation.fresh_tmp_keeping_mounts, without bubblewrap: under `unshare -Urm` a stand-in for
the sandbox's /tmp is built (a kit bound read-only in a folder with a space in its name, a file
bound read-only, a stage tmpfs with a writable socket folder bound inside it, and an
attacker's files, one in a folder locked 0555); then, as the warm kernel server does, a child
takes namespaces of its own (isolation.new_namespaces: its mounts are locked, as a kernel's
are) and its PID 1 gets private_scratch(keep_mounts=True)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    not shutil.which("unshare")
    or subprocess.run(["unshare", "-Urm", "true"], capture_output=True).returncode != 0,
    reason="needs unshare -Urm (user and mount namespaces)",
)

SCRIPT = textwrap.dedent("""\
    import json, os, sys
    sys.path.insert(0, sys.argv[2])  # the kit
    from grader.untrusted import isolation

    src = sys.argv[1]
    isolation.private_mounts()
    held = {n: os.open(os.path.join(src, n), os.O_PATH) for n in ('kit', 'one.py', 'shared')}
    isolation.mount_tmpfs('/tmp', 16)  # the sandbox's /tmp, with the sandbox's mounts on it
    clone = '/tmp/clean clone'
    os.makedirs(clone + '/kit')
    open(clone + '/one.py', 'w').close()
    for name, flags in (('kit', 0), ('one.py', 0)):
        isolation.bind(f"/proc/self/fd/{held[name]}", f"{clone}/{name}")
        isolation._check(isolation._libc.mount(None, f"{clone}/{name}".encode(), None,
            isolation.MS_REMOUNT | isolation.MS_BIND | isolation.MS_RDONLY, None), 'ro')
    os.makedirs('/tmp/stage')
    isolation.mount_tmpfs('/tmp/stage', 8)
    open('/tmp/stage/server.txt', 'w').write('the stage is a mount: it comes back whole')
    os.makedirs('/tmp/stage/ipc')
    isolation.bind(f"/proc/self/fd/{held['shared']}", '/tmp/stage/ipc')
    startup = '/tmp/.ipython/profile_default/startup'  # what an earlier kernel left
    os.makedirs(startup)
    open(startup + '/00-a1.py', 'w').write('print("FOOTHOLD")')
    os.chmod(startup, 0o555)
    open(clone + '/beside-the-kit.txt', 'w').write('x')

    isolation.new_namespaces()  # as zygote._fork_kernel: the next child is PID 1
    if os.fork():
        _, status = os.wait()
        sys.exit(os.waitstatus_to_exitcode(status))
    isolation.private_scratch(16, keep_mounts=True, only=json.loads(sys.argv[3]))

    def writes(path):
        try:
            open(path, 'a').close()
            return True
        except OSError as e:
            return e.strerror

    sys.path.insert(0, clone + '/kit')
    import kitpkg
    out = {
        'pid': os.getpid(),
        'tmp': sorted(os.listdir('/tmp')),
        'clone': sorted(os.listdir(clone)),
        'kit': kitpkg.VALUE,
        'one': open(clone + '/one.py').read(),
        'stage': sorted(os.listdir('/tmp/stage')),
        'writes': {p: writes(p) for p in (clone + '/kit/x.py', clone + '/one.py', '/tmp/stage/ipc/from-run',
                                          '/tmp/new.txt', clone + '/new.txt')},
        'tmp_mb': os.statvfs('/tmp').f_blocks * os.statvfs('/tmp').f_frsize // 2**20,
    }
    print(json.dumps(out))
    """)


@pytest.mark.integration
@pytest.mark.parametrize("only", [None, ["/tmp/clean clone", "/tmp/stage", "/usr"]], ids=["all", "named"])
def test_only_the_mounts_under_tmp_come_back_read_only_where_they_were(tmp_path, only):
    """Kept as a replay run keeps its installation (`only`: a folder holding the sandbox's binds,
    as the kit's folder holds grader/untrusted/ and grader/exercise/), the same mounts come back."""
    (tmp_path / "kit" / "kitpkg").mkdir(parents=True)
    (tmp_path / "kit" / "kitpkg" / "__init__.py").write_text("VALUE = 42\n")
    (tmp_path / "one.py").write_text("one file\n")
    (tmp_path / "shared").mkdir()
    root = Path(__file__).resolve().parents[3]
    proc = subprocess.run(
        ["unshare", "-Urm", sys.executable, "-I", "-c", SCRIPT, str(tmp_path), str(root), json.dumps(only)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=root,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout)
    assert seen["pid"] == 1
    assert seen["tmp"] == ["clean clone", "stage"]  # no .ipython: nothing of the old /tmp's own
    assert seen["clone"] == ["kit", "one.py"]
    assert (seen["kit"], seen["one"]) == (42, "one file\n")
    assert seen["stage"] == ["ipc", "server.txt"]
    w = seen["writes"]
    assert w.pop("/tmp/clean clone/kit/x.py") == w.pop("/tmp/clean clone/one.py") == "Read-only file system"
    assert set(w.values()) == {True}, w  # the socket folder, the fresh /tmp
    assert (tmp_path / "shared" / "from-run").exists()  # the same folder, not a copy
    assert seen["tmp_mb"] == 16


def test_a_replay_run_keeps_only_the_mounts_of_its_python_and_kit():
    """A kit and virtualenv kept under /tmp (a CI clone at /tmp/ci) stay importable in a run's
    fresh /tmp (sympy and torch._dynamo are imported on first use: torch.func's first call
    failed with ModuleNotFoundError before), and the exchange folder does not come back."""
    from grader.untrusted import isolation

    mounts = {
        "/tmp/ci/main/.venv": {"ro"},
        "/tmp/ci/main/grader": {"ro"},
        "/tmp/bn-exchange-x": {"ro"},
        "/tmp/ci/main/.venv/lib/sub": {"ro"},
    }
    only = ("/tmp/ci/main/.venv", "/usr", "/tmp/ci/main/grader")
    assert set(isolation.within(mounts, only)) == {
        "/tmp/ci/main/.venv",
        "/tmp/ci/main/grader",
        "/tmp/ci/main/.venv/lib/sub",
    }
    assert isolation.within({"/tmp/ci": set()}, only) == {"/tmp/ci": set()}  # bound whole, it holds them
    assert isolation.within({"/tmp/ci/main/.venv2": set()}, only) == {}  # a name's prefix is not a folder's
    assert isolation.within(mounts, None) == mounts


UNBOUND = textwrap.dedent("""\
    import json, os, sys
    sys.path.insert(0, sys.argv[2])  # the kit
    from grader.untrusted import isolation

    venv, beside = sys.argv[1] + '/venv', sys.argv[1] + '/beside.txt'
    isolation.private_mounts()  # no sandbox bound anything: the venv is a folder of /tmp's
    isolation.fresh_tmp_keeping_mounts(16, only=[venv, '/usr'])
    sys.path.insert(0, venv)
    import lazy
    try:
        open(venv + '/new.py', 'w').close()
        wrote = True
    except OSError as e:
        wrote = e.strerror
    print(json.dumps({'lazy': lazy.VALUE, 'beside': os.path.exists(beside), 'wrote': wrote}))
    """)


@pytest.mark.integration
def test_a_virtualenv_in_tmp_that_no_sandbox_bound_comes_back_read_only(tmp_path):
    """The student's own check and the unconfined mode run the replay without bubblewrap: a
    clone or virtualenv kept under /tmp is then no mount, and a run's fresh /tmp hid it (its
    first torch.func call could not import torch._dynamo: another hint than the grader's)."""
    assert str(tmp_path).startswith("/tmp/")
    (tmp_path / "venv").mkdir()
    (tmp_path / "venv" / "lazy.py").write_text("VALUE = 'imported on first use'\n")
    (tmp_path / "beside.txt").write_text("not the installation's")
    root = Path(__file__).resolve().parents[3]
    proc = subprocess.run(
        ["unshare", "-Urm", sys.executable, "-I", "-c", UNBOUND, str(tmp_path), str(root)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=root,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout) == {
        "lazy": "imported on first use",
        "beside": False,
        "wrote": "Read-only file system",
    }
    assert not (tmp_path / "venv" / "new.py").exists()
