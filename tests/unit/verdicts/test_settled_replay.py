"""grader/verdicts/settled.py on real replays (the sandboxed server): cascades from the corpus
graded with the stand-ins and with every own-rule run made give the same verdicts, hints and
flags, from fewer runs."""

from __future__ import annotations

import nbformat
import pytest

from grader.incoming.submissions import write_submissions
from grader.replay import run as replay_run
from grader.settings import JudgeSettings, seed_for
from grader.verdicts import settled
from grader.verdicts.judge import judge_submission

from conftest import ROOT
from corpus import CORPUS
from hint_corpus import HINTS

pytestmark = pytest.mark.integration  # starts processes: make integration

# a wrong gradient near the loss, one in the middle, two mistakes, a decomposition's route
CASCADES = ("s06_log", "s14_two", "d02_decomp", "hint_bessel_n")


def _judged(cells, student, names_txt, monkeypatch, every_run: bool):
    made = []
    graded = replay_run._Runs.graded

    def counted(self, run, *args, **kwargs):
        made.append(run)
        return graded(self, run, *args, **kwargs)

    monkeypatch.setattr(replay_run._Runs, "graded", counted)
    if every_run:
        monkeypatch.setattr(settled.StandIns, "settled_by", lambda self, run, made: None)
    settings = JudgeSettings(seed=seed_for(student, "backprop_ninja"))
    rec = judge_submission(cells, student=student, settings=settings, names_txt=names_txt)
    monkeypatch.undo()
    verdicts = {k: (v.score, v.hint, v.lines, v.problem) for k, v in rec.verdicts.items()}
    return verdicts, [(f.kind, f.grade_ids) for f in rec.suspicious], rec.problems, made


@pytest.mark.parametrize("student", CASCADES)
def test_stand_ins_change_no_verdict_and_save_runs(student, names_txt, tmp_path, monkeypatch):
    sample = next(c.sample for c in [*CORPUS, *HINTS] if c.sample.student == student)
    write_submissions([sample], course=ROOT, submitted=tmp_path)
    cells = nbformat.read(next(tmp_path.rglob("*.ipynb")), 4).cells
    fewer = _judged(cells, student, names_txt, monkeypatch, every_run=False)
    every = _judged(cells, student, names_txt, monkeypatch, every_run=True)
    assert fewer[:3] == every[:3]
    assert set(fewer[3]) < set(every[3]), (fewer[3], every[3])
