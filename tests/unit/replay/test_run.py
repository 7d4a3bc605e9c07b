"""grader/replay/run.py in-process, with a server that answers from a script (no process): a
graded run over the numeric bound runs once more and its second result is the one judged;
nothing else runs twice; the runs after the notebook's own may go to its run group, a run once
more goes alone."""

from __future__ import annotations

from grader.exercise import spec
from grader.replay import run as run_mod
from grader.settings import JudgeSettings
from grader.untrusted.protocol import AS_SUBMITTED, EX3, STATUS_OK

from conftest import JUDGE_SEED
from replay_runs import frame


class ScriptedServer:
    """Answers each run with the next of its CPU costs for ex1_solution, at a pace of its own."""

    def __init__(self, costs: dict[str, list[float]]):
        self.costs, self.calls, self.grouped = costs, [], []

    def replay(self, workdir, *, run, data, timeout, autograd, statement_seconds=None, group=False):
        self.calls.append(run)
        self.grouped.append(group)
        cost = self.costs[run].pop(0)
        return STATUS_OK, frame({"cpu": {"ex1_solution": cost}}), cost + 0.1, cost / 1000


def _replay(monkeypatch, fresh, names_txt, costs, then_runs=()):
    server = ScriptedServer(costs)
    monkeypatch.setattr(run_mod, "server_for", lambda prefix, launcher: server)
    out = run_mod.run_replay(
        [],
        fresh,
        JudgeSettings(seed=JUDGE_SEED),
        exercise=spec.NINJA,
        data={"names.txt": names_txt},
        then=lambda main: list(then_runs),
        again=lambda run: run.meta["cpu"]["ex1_solution"] > 1.0,
    )
    _replay.grouped = server.grouped
    return out, server.calls


def test_a_run_over_the_bound_runs_again_and_its_second_result_is_judged(monkeypatch, fresh, names_txt):
    out, calls = _replay(monkeypatch, fresh, names_txt, {AS_SUBMITTED: [5.0, 0.2], EX3: [0.3]}, [EX3])
    assert calls == [AS_SUBMITTED, AS_SUBMITTED, EX3]
    assert out.runs[AS_SUBMITTED].meta["cpu"] == {"ex1_solution": 0.2}
    assert out.runs[AS_SUBMITTED].pace == 0.2 / 1000  # the second run's pace, with its count


def test_a_run_over_the_bound_twice_is_judged_over_it(monkeypatch, fresh, names_txt):
    out, calls = _replay(monkeypatch, fresh, names_txt, {AS_SUBMITTED: [0.2], EX3: [4.0, 6.0]}, [EX3])
    assert calls == [AS_SUBMITTED, EX3, EX3]
    assert out.runs[EX3].meta["cpu"] == {"ex1_solution": 6.0}
    # the runs after the notebook's own go to its run group; the second of a costly one, alone
    assert _replay.grouped == [False, True, False]


def test_a_run_within_the_bound_runs_once(monkeypatch, fresh, names_txt):
    out, calls = _replay(monkeypatch, fresh, names_txt, {AS_SUBMITTED: [0.2]})
    assert calls == [AS_SUBMITTED] and out.problem is None
