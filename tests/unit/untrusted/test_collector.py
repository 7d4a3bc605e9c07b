"""grader/untrusted/collector.py in the warm servers: imported first, it keeps the collector off
while the server imports torch, ipykernel and the kit; `started()` freezes start-up's objects and
turns the collector back on for what the runs and kernels make."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import ROOT

pytestmark = pytest.mark.integration  # starts Pythons

PROBE = """
import gc, json, sys
sys.path.insert(0, {root!r})
counted = lambda: sum(g["collections"] for g in gc.get_stats())
from grader.untrusted import collector  # the server's first import, as in the server
# counted from here: compiling the packages' sources before this line may collect, cheaply
at_start = counted()
import grader.untrusted.{server}  # its imports: torch, the kit's untrusted side
before = {{"enabled": gc.isenabled(), "collections": counted() - at_start}}
collector.started()
class Node: pass
a, b = Node(), Node()
a.other, b.other = b, a
del a, b
after = {{"after": gc.isenabled(), "frozen": gc.get_freeze_count(), "found": gc.collect()}}
print(json.dumps({{**before, **after}}))
"""


@pytest.mark.parametrize("server", ["server", "zygote"])
def test_a_warm_server_imports_uncollected_and_collects_after(server, tmp_path):
    # an empty bytecode cache, as on a clean clone: compiling allocates, and collected there once
    cold = ["-X", f"pycache_prefix={tmp_path}"]
    out = subprocess.run(
        [sys.executable, "-I", *cold, "-c", PROBE.format(root=str(ROOT), server=server)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    seen = json.loads(out.stdout.splitlines()[-1])
    # importing torch alone runs three full collections where the collector is on
    assert seen["enabled"] is False and seen["collections"] == 0, seen
    assert seen["after"] is True and seen["frozen"] > 100_000, seen
    assert seen["found"] >= 2, seen  # the cycle made after start-up was collected
