"""The replay server: the process tree around the untrusted runs (runner.py runs the cells).
`python -I -m grader.untrusted.server` is started by the judge (grader/replay/client.py) inside
the sandbox. It never runs a student's code itself: each run is a fork, isolated in namespaces of
its own (isolation.py), whose result comes back on a pipe of its own, bounded, and is relayed to
the judge with the request's nonce."""

from __future__ import annotations

from . import collector  # first: no collection while the server starts

# isort: split
import json
import os
import sys

import torch

from ..exercise import pace
from . import derivative_block, huge_pages, isolation, kit_view, preload
from .pinning import pinned
from .protocol import AnswerHeader, RunRequest, ServerHello
from .run_group import RunGroups, groupable
from .run_process import one_run
from .runner import NoIPython, Runner


def serve() -> int:
    """A warm replay server that runs no student code itself: torch imported and the shared
    setup cells run once, then each request forks an isolated child for one run of one
    submission, one run at a time (no run sees data meant for a later one); a request marked
    "group" goes to the submission's run group (run_group.py).
    Protocol (protocol.py), on stdin a JSON object a line: a ServerHello {"prefix", "data_dir"},
    then RunRequests {"workdir", "run", "timeout", "nonce", ...}. On the original stdout
    {"ready": true, "errors"} once, then for each request an AnswerHeader line {"nonce",
    "status", "size", "cpu", "pace"} and `size` bytes, the run's last result frame
    (encode_frame). The pace is timed here, just before and just after the run (no code of the
    student's runs in this process), for the judge to time the run's cells against.
    No run can write here: it holds none of these pipes."""
    isolation.not_dumpable()
    proto = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)  # anything printed by the setup cells goes to stderr
    sys.stdout = sys.stderr
    torch.set_num_threads(1)  # fork-safe, and one core per replay
    torch.set_grad_enabled(False)  # no autograd to copy answers from
    preload.preload()  # what each run's guard replaces, imported once
    preload.warm_serialization()  # what each run's loading and sending would set up, once
    kit_view.install()  # the kit as the sandbox shows it, where there is no sandbox too
    hello: ServerHello = json.loads(sys.stdin.readline())
    os.chdir(hello["data_dir"])
    runner = Runner({"cells": hello["prefix"], "first_answer": len(hello["prefix"])}, {})
    ns0 = runner.setup({"__name__": "__main__", "get_ipython": NoIPython})
    warm = (hello["prefix"], ns0)
    derivative_block.install()  # torch's derivative code off for every run forked from here
    pace.seconds()  # its first timings are a cold start's
    collector.started()  # start-up's objects never collected in a run: no pause, no copy-on-write
    isolation.probe_own_proc()  # a run mounts a /proc of its own only where Linux allows it
    huge_pages.collapse()  # fewer page-table entries for each run's fork to copy
    proto.write((json.dumps({"ready": True, "errors": runner.errors}) + "\n").encode())
    groups = RunGroups(warm)
    for line in sys.stdin:
        req: RunRequest = json.loads(line)
        grouped = groupable(req)
        if not grouped:
            groups.close()  # another submission, or a run that goes alone: the group is done
        with pinned(groups.cores(req)):  # the run and its pace on one core
            before = pace.seconds()
            status, frame, cpu = groups.run(req) if grouped else one_run(req, warm)
            paced = (before + pace.seconds()) / 2
        frame = frame or b""
        header: AnswerHeader = {
            "nonce": req.get("nonce"),
            "status": status,
            "size": len(frame),
            "cpu": cpu,
            "pace": paced,
        }
        proto.write((json.dumps(header) + "\n").encode() + frame)
    groups.close()
    return 0


if __name__ == "__main__":
    sys.exit(serve())
