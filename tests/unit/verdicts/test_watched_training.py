"""A watched run's exercise-4 training loop, on real replays (the sandboxed server): made only
where the blocked run lost the training point (outcomes.watch_training). Where it kept it, the
watched run still calls manual_backward (its gradients are compared) but does not train, and
verdicts, hints and flags are those of a watched run that trained."""

from __future__ import annotations

import nbformat
import pytest

from grader.incoming.submissions import write_submissions
from grader.settings import JudgeSettings, seed_for
from grader.untrusted.protocol import EX4, TRAINED
from grader.verdicts import judge, outcomes

from conftest import ROOT
from corpus import CORPUS

pytestmark = pytest.mark.integration  # starts processes: make integration


def _judged(cells, student, names_txt, monkeypatch, always: bool):
    outs = []
    real = judge.run_replay
    monkeypatch.setattr(judge, "run_replay", lambda *a, **k: outs.append(real(*a, **k)) or outs[-1])
    if always:
        monkeypatch.setattr(outcomes, "watch_training", lambda main, fresh, exercise: True)
    settings = JudgeSettings(seed=seed_for(student, "backprop_ninja"))
    rec = judge.judge_submission(cells, student=student, settings=settings, names_txt=names_txt)
    monkeypatch.undo()
    verdicts = {k: (v.score, v.hint, v.lines, v.problem) for k, v in rec.verdicts.items()}
    return verdicts, [(f.kind, f.grade_ids, f.evidence) for f in rec.suspicious], outs[0].counterpart


def test_a_watched_run_trains_only_where_its_training_could_explain(names_txt, tmp_path, monkeypatch):
    student = "c02_autograd"  # autograd for exercise 1, an honest manual_backward
    sample = next(c.sample for c in CORPUS if c.sample.student == student)
    write_submissions([sample], course=ROOT, submitted=tmp_path)
    cells = nbformat.read(next(tmp_path.rglob("*.ipynb")), 4).cells
    verdicts, flags, watched = _judged(cells, student, names_txt, monkeypatch, always=False)
    trained_too = _judged(cells, student, names_txt, monkeypatch, always=True)
    assert verdicts["ex4_training"][0] == 1 and flags and (verdicts, flags) == trained_too[:2]
    kinds = lambda run: {k.split("/")[0] for k in run.tensors}  # noqa: E731
    assert EX4 in kinds(watched) and TRAINED not in kinds(watched)
    assert {EX4, TRAINED} <= kinds(trained_too[2])
