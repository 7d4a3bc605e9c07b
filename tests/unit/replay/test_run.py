"""grader/replay/run.py in-process, with a server that answers from a script (no process): a
graded run over the numeric bound runs once more and its second result is the one judged;
nothing else runs twice; the runs after the notebook's own may go to its run group, a run once
more goes alone; a notebook that reached for autograd runs watched only where that could
explain something."""

from __future__ import annotations

from grader.exercise import spec
from grader.replay import run as run_mod
from grader.settings import JudgeSettings
from grader.untrusted.protocol import AS_SUBMITTED, EX3, STATUS_OK, WATCH

from conftest import JUDGE_SEED
from replay_runs import frame


class ScriptedServer:
    """Answers each run with the next of its CPU costs for ex1_solution, at a pace of its own."""

    def __init__(self, costs: dict[str, list[float]], events: list | None = None):
        self.costs, self.calls, self.grouped, self.modes, self.trains = costs, [], [], [], []
        self.events = events or []  # where each run reached for autograd

    def replay(
        self, workdir, *, run, data, timeout, autograd, statement_seconds=None, group=False, train=True
    ):
        self.calls.append(run)
        self.trains.append(train)
        self.grouped.append(group)
        self.modes.append(autograd)
        cost = self.costs[run].pop(0)
        meta = {"cpu": {"ex1_solution": cost}, "autograd": self.events}
        return STATUS_OK, frame(meta), cost + 0.1, cost / 1000


def _replay(
    monkeypatch, fresh, names_txt, costs, then_runs=(), events=None, explains=lambda main: True, trains=None
):
    server = ScriptedServer(costs, events)
    monkeypatch.setattr(run_mod, "server_for", lambda prefix, launcher: server)
    out = run_mod.run_replay(
        [],
        fresh,
        JudgeSettings(seed=JUDGE_SEED),
        exercise=spec.NINJA,
        data={"names.txt": names_txt},
        then=lambda main: list(then_runs),
        again=lambda run: run.meta["cpu"]["ex1_solution"] > 1.0,
        explains=explains,
        **({"trains_watched": trains} if trains else {}),
    )
    _replay.grouped, _replay.modes, _replay.trains = server.grouped, server.modes, server.trains
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


CALL = {"kind": "call", "what": "torch.autograd.grad", "cell": "your cell after ex1_solution", "line": 2}


def test_a_notebook_that_reached_for_autograd_runs_watched_where_that_can_explain(
    monkeypatch, fresh, names_txt
):
    seen = []
    explains = lambda main: seen.append(main.meta["autograd"]) or True  # noqa: E731
    costs = {AS_SUBMITTED: [0.2, 0.2]}
    out, calls = _replay(monkeypatch, fresh, names_txt, costs, events=[CALL], explains=explains)
    assert calls == [AS_SUBMITTED, AS_SUBMITTED] and _replay.modes[1] == WATCH
    assert out.counterpart is not None and seen == [[CALL]]  # asked of the blocked run


def test_a_watched_run_trains_where_the_judge_says_its_training_could_explain(monkeypatch, fresh, names_txt):
    for says in (True, False):
        seen: list = []
        trains = lambda main, seen=seen, says=says: seen.append(main.meta["autograd"]) or says  # noqa: E731
        costs = {AS_SUBMITTED: [0.2, 0.2]}
        _, calls = _replay(monkeypatch, fresh, names_txt, costs, events=[CALL], trains=trains)
        assert calls == [AS_SUBMITTED, AS_SUBMITTED] and _replay.modes[1] == WATCH
        assert _replay.trains == [True, says] and seen == [[CALL]]  # the blocked run's, asked once


def test_a_watched_run_that_could_explain_nothing_is_not_made(monkeypatch, fresh, names_txt):
    costs = {AS_SUBMITTED: [0.2, 0.2]}
    out, calls = _replay(monkeypatch, fresh, names_txt, costs, events=[CALL], explains=lambda main: False)
    assert calls == [AS_SUBMITTED] and out.counterpart is None


def test_a_notebook_that_never_reached_for_autograd_is_not_asked(monkeypatch, fresh, names_txt):
    def explains(main):
        raise AssertionError("asked without a reach for autograd")

    out, calls = _replay(monkeypatch, fresh, names_txt, {AS_SUBMITTED: [0.2]}, explains=explains)
    assert calls == [AS_SUBMITTED] and out.counterpart is None
