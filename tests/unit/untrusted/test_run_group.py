"""The run group (grader/untrusted/run_group.py), for real: a replay server started plainly
(replay.client.launch_plain), real forks and namespaces, real torch. A submission's runs after its
first give in a group what they give alone; a run over its time ends its group and the next run
starts a new one; a plan with a cell of the student's before the answers is not grouped."""

from __future__ import annotations

import functools
import os
import re
import tempfile
from pathlib import Path

import nbformat
import pytest
import torch

from grader.confine import bwrap_works, default_sandbox
from grader.exercise import spec
from grader.incoming.submissions import fill, reference_answers
from grader.replay import results
from grader.replay import run as run_mod
from grader.replay.client import ReplayServer, exchange_root, launch_plain, launch_sandboxed
from grader.replay.plan import joint_runs, replay_cells, run_order, warm_prefix, what_is_asked
from grader.settings import JudgeSettings
from grader.untrusted.protocol import BLOCK, STATUS_OK, run_name_local

from conftest import JUDGE_SEED, ROOT, descendants

pytestmark = pytest.mark.integration

LOCAL = [r for r in run_order() if r.startswith("local:")]


@pytest.fixture(scope="module")
def release():
    source = nbformat.read(ROOT / "source" / spec.ASSIGNMENT / f"{spec.NOTEBOOK}.ipynb", 4)
    release = nbformat.read(ROOT / "release" / spec.ASSIGNMENT / f"{spec.NOTEBOOK}.ipynb", 4)
    return source, release


def _runs(release, fresh, names_txt, ex1: str, added=(), launcher=launch_plain):
    """A judge's side of one submission whose exercise-1 cell is `ex1`: its plan written, a
    server (plain unless said), the _Runs that send its runs."""
    source, nb = release
    answers = dict(reference_answers(source), ex1_solution=ex1)
    settings = JudgeSettings(seed=JUDGE_SEED)
    cells = replay_cells(fill(nb, answers, list(added)).cells, settings)
    work = Path(tempfile.mkdtemp(prefix="replay-", dir=exchange_root()))
    os.chmod(work, 0o755)
    data = {"names.txt": names_txt}
    run_mod.write_plan(work, cells, fresh, settings, data, what_is_asked())
    server = ReplayServer(warm_prefix(cells), launcher)
    expected = results.expected_shapes(fresh)
    return run_mod._Runs(server, work, fresh, settings, data, spec.NINJA, expected), server


def _same(a, b) -> bool:
    return (
        a.status == b.status
        and a.meta.get("values") == b.meta.get("values")
        and a.meta.get("errors") == b.meta.get("errors")
        and a.tensors.keys() == b.tensors.keys()
        and all(torch.equal(a.tensors[k], b.tensors[k]) for k in a.tensors)
    )


def test_a_groups_runs_give_what_they_give_alone(release, fresh, names_txt):
    # a wrong first gradient: every later gradient's own-rule run matters, as in the corpus
    source, _ = release
    right = reference_answers(source)["ex1_solution"]
    ex1 = right.replace("dlogprobs[range(n), Yb] = -1.0/n", "dlogprobs[range(n), Yb] = -1.0")
    assert ex1 != right
    runs, server = _runs(release, fresh, names_txt, ex1)
    try:
        runs.one("main", BLOCK)
        grouped = {r: runs.one(r, BLOCK, group=True) for r in LOCAL}
        alone = {r: runs.one(r, BLOCK) for r in LOCAL}
        joint = {}  # plan.joint_runs: one run for the gradients handed the same
        for run in [r for r in joint_runs(LOCAL) if "+" in r]:
            joint.update(results.each_gradients(run, runs.one(run, BLOCK, group=True)))
    finally:
        server.close()
    assert all(grouped[r].status == STATUS_OK for r in LOCAL), {r: grouped[r].status for r in LOCAL}
    assert [r for r in LOCAL if not _same(grouped[r], alone[r])] == []
    # a joint run's gradient: its own value from it, as its run alone gives it (which keeps them all)
    alone_own = {r: results.gradients_own_values(alone[r], r.partition(":")[2]) for r in joint}
    assert len(joint) == 9 and [r for r in joint if not _same(joint[r], alone_own[r])] == []
    assert all(grouped[r].cpu is not None for r in LOCAL)  # counted by the kernel, as alone
    # the server's pace around each run, grouped or alone (grader/exercise/pace.py)
    assert all(0 < r.pace < 0.05 for r in [*grouped.values(), *alone.values()])


CORES = "\nimport os\nraise RuntimeError('cores %s' % sorted(os.sched_getaffinity(0)))"


def _cores(result) -> list[int]:
    said = [e["error"] for e in result.meta["errors"] if "cores [" in e["error"]]
    return [int(c) for c in re.findall(r"\d+", said[0].partition("cores ")[2])]


@pytest.mark.parametrize("where", ["plain", "sandboxed"])
def test_a_run_is_pinned_to_one_core_and_a_groups_runs_to_the_groups(release, fresh, names_txt, where):
    """grader/untrusted/pinning.py, in the real server: each run's cells on one core (the one its
    pace was timed on), a group's runs all on the core the group was forked on."""
    if where == "sandboxed" and not bwrap_works():
        pytest.skip("bubblewrap is needed (.ci/run installs it)")
    launcher = (
        launch_plain if where == "plain" else functools.partial(launch_sandboxed, sandbox=default_sandbox())
    )
    source, _ = release
    ex1 = reference_answers(source)["ex1_solution"] + CORES
    runs, server = _runs(release, fresh, names_txt, ex1, launcher=launcher)
    try:
        main = runs.one("main", BLOCK)
        grouped = [runs.one(r, BLOCK, group=True) for r in LOCAL[:4]]
        alone = runs.one(LOCAL[4], BLOCK)
    finally:
        server.close()
    assert len(_cores(main)) == 1 and len(_cores(alone)) == 1
    assert len({tuple(_cores(r)) for r in grouped}) == 1 and len(_cores(grouped[0])) == 1
    assert all(0 < r.pace < 0.05 for r in [main, alone, *grouped])


SLOW = "import time\nif 'dnorm_logits' in globals() and 'dlogit_maxes' not in globals():\n    time.sleep(60)"


def test_a_run_over_its_time_ends_its_group_and_the_next_starts_a_new_one(release, fresh, names_txt):
    # only local:dlogit_maxes is handed dnorm_logits without dlogit_maxes: it alone sleeps
    runs, server = _runs(release, fresh, names_txt, SLOW)
    runs.timeout = 3.0
    try:
        before = runs.one(run_name_local("dnorm_logits"), BLOCK, group=True)
        first_group = set(descendants(server.proc.pid))
        slow = runs.one(run_name_local("dlogit_maxes"), BLOCK, group=True)
        after = runs.one(run_name_local("dlogits"), BLOCK, group=True)
        second_group = set(descendants(server.proc.pid))
    finally:
        server.close()
    assert before.status == STATUS_OK and after.status == STATUS_OK
    assert slow.status.startswith("timed out"), slow.status
    # each group: the server's child outside its namespaces and their PID 1; the first is gone
    assert len(first_group) == 2 and len(second_group) == 2
    assert first_group.isdisjoint(second_group)
    assert [pid for pid in first_group if _running(pid)] == []


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


COUNT = "open('/tmp/seen', 'a').write('x')\nruns_seen = len(open('/tmp/seen').read())\n"


def test_one_groups_runs_share_its_tmp_and_a_plan_with_a_cell_of_the_students_before_is_alone(
    release, fresh, names_txt
):
    ex1 = COUNT + "dprobs = torch.full_like(probs, float(runs_seen))\n"
    ex1 += "dcounts_sum_inv = torch.full_like(counts_sum_inv, float(runs_seen))"
    runs = {run_name_local("dprobs"): "dprobs", run_name_local("dcounts_sum_inv"): "dcounts_sum_inv"}
    grouped, server = _runs(release, fresh, names_txt, ex1)
    early, server2 = _runs(release, fresh, names_txt, ex1, added=[("ex1_md", "early = 1")])
    try:
        seen = [grouped.one(r, BLOCK, group=True).tensors[k] for r, k in runs.items()]
        seen_alone = [early.one(r, BLOCK, group=True).tensors[k] for r, k in runs.items()]
    finally:
        server.close()
        server2.close()
    # within one group, the second run sees what the first left in /tmp (one student's own runs)
    assert [float(t.flatten()[0]) for t in seen] == [1.0, 2.0]
    # a cell of the student's before the first answer would run in the group: each run alone
    assert [float(t.flatten()[0]) for t in seen_alone] == [1.0, 1.0]
