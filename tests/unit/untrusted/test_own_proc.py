"""isolation.probe_own_proc: a warm server asks once whether its runs may mount a /proc of their
own; under bubblewrap's /proc Linux refuses every time, with a line in the kernel's log each
time ("VFS: Mount too revealing": 3,275 of them here in a day of grading), so runs and kernels
forked there no longer try. Where Linux allows it, they still do."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from grader.confine import bwrap_works, default_sandbox

from conftest import ROOT

pytestmark = pytest.mark.integration

# As a warm server does: probe once; then a run, PID 1 of namespaces of its own, makes its
# private scratch. It says whether it tried to mount a /proc, and whether it has one of its own.
SCRIPT = textwrap.dedent("""\
    import json, os, sys
    from grader.untrusted import isolation
    tried = []
    mount = isolation._mount_proc
    isolation._mount_proc = lambda: tried.append(1) or mount()
    probed = isolation.probe_own_proc()
    read, write = os.pipe()
    isolation.new_namespaces()
    if os.fork() == 0:
        isolation.private_scratch(16)
        own = os.readlink('/proc/self') == '1'
        os.write(write, json.dumps({'tried': bool(tried), 'own': own}).encode())
        os._exit(0)
    os.close(write)
    seen = json.loads(os.read(read, 1000) or b'{}')
    os.wait()
    print(json.dumps(dict(seen, probed=probed)))
""")


@pytest.mark.skipif(not bwrap_works(), reason="bubblewrap cannot start here")
def test_a_run_under_bubblewrap_does_not_try_to_mount_a_proc():
    sandbox, lease = default_sandbox().with_own_user()
    try:
        cmd = sandbox.command([sys.executable, "-I", "-c", SCRIPT], writable={}, readonly={}, cwd="/")
        done = subprocess.run(cmd, capture_output=True, text=True, preexec_fn=sandbox.limits.apply)
    finally:
        if lease is not None:
            lease.close()
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"probed": False, "tried": False, "own": False}, done.stdout


def test_where_linux_allows_it_a_run_still_mounts_its_own_proc():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0 and "unshare" in done.stderr:
        pytest.skip("no user namespaces here")
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    # the probe says what a run finds: a /proc of its own exactly where the probe said it may
    assert seen == {"probed": seen["own"], "tried": seen["own"], "own": seen["own"]}, seen
