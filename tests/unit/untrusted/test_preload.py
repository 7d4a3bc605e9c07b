"""grader/untrusted/preload.py: what the warm replay server sets up once for every run it forks.
warm_serialization: torch's (weights-only) pickling set up in the server, so a forked run that
loads its inputs and saves its results does not set it up again in pages of its own."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

# A fresh Python: a forked child loads a few tensors weights-only, as a run loads its inject
# file; the child's minor page faults (copies of the parent's pages, new pages) are counted by
# the kernel (wait4), median of 9 children: a fork's own, then with the load, without and then
# with the server's warm-up.
CHILD_FAULTS = textwrap.dedent(
    """
    import io, os, statistics, sys
    import torch
    from grader.untrusted import preload
    blob = io.BytesIO()
    torch.save({f"d{i}": torch.randn(32, 64) for i in range(4)}, blob)
    data = blob.getvalue()

    def faults(load=True):
        counts = []
        for _ in range(9):
            pid = os.fork()
            if pid == 0:
                loaded = torch.load(io.BytesIO(data), weights_only=True) if load else [0] * 4
                os._exit(0 if len(loaded) == 4 else 1)
            _, status, usage = os.wait4(pid, 0)
            assert status == 0
            counts.append(usage.ru_minflt)
        return statistics.median(counts)

    fork = faults(load=False)
    cold = faults()
    preload.warm_serialization()
    print(fork, cold, faults())
    """
)


@pytest.mark.integration
def test_a_run_forked_after_the_warm_up_loads_its_inputs_in_fewer_pages_of_its_own():
    # the cold count first: in this fresh process nothing has loaded weights-only yet, and the
    # first fork's load does not warm the parent
    out = subprocess.run([sys.executable, "-c", CHILD_FAULTS], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    fork, cold, warm = map(float, out.stdout.split())  # the fork's own faults, then with a load
    assert warm - fork < 0.8 * (cold - fork), (fork, cold, warm)


def test_the_warm_up_changes_no_state_a_run_starts_from():
    import torch

    from grader.untrusted import preload

    rng, grad, dtype = torch.get_rng_state(), torch.is_grad_enabled(), torch.get_default_dtype()
    with torch.no_grad():
        preload.warm_serialization()
        assert not torch.is_grad_enabled()
    assert torch.equal(torch.get_rng_state(), rng)
    assert (torch.is_grad_enabled(), torch.get_default_dtype()) == (grad, dtype)
