"""grader/self_check/ in-process: the student's own check reads a notebook file or Colab's
JSON, finds names.txt as the data cell left it, prints the feedback's table (the judge itself
is replaced here: tests/e2e/test_replay_corpus.py compares its verdicts with the grader's)."""

from __future__ import annotations

import json
import sys
import types

import pytest

from grader.exercise import spec
from grader.self_check import check, colab


def _record(**overrides) -> dict:
    verdicts = {
        g.grade_id: {"score": g.points, "carried": False, "hint": None, "lines": []} for g in spec.GRADED
    }
    verdicts["ex1_dbndiff2"] = {
        "score": 0.0,
        "carried": False,
        "hint": "Bessel's correction: n-1",
        "lines": [],
    }
    verdicts["ex1_dbndiff"] = {
        "score": 1.0,
        "carried": True,
        "hint": None,
        "lines": ["a carried error from dbndiff2"],
    }
    total = sum(v["score"] for v in verdicts.values())
    return {
        "verdicts": verdicts,
        "score": total,
        "max_score": spec.total_points(),
        "problems": [],
    } | overrides


def test_the_table_is_the_feedbacks_rows_in_backward_order():
    lines = check.table(_record()).splitlines()
    assert lines[0].split()[:3] == ["ex", "gradient", "grade"]
    body = lines[1 : 1 + len(spec.GRADED)]
    assert [l.split()[2] for l in body] == [g.grade_id for g in spec.GRADED]
    bessel = next(l for l in body if "ex1_dbndiff2" in l)
    assert "0 / 1" in bessel and bessel.endswith("Bessel's correction: n-1")
    assert next(l for l in body if " ex1_dbndiff " in l).endswith("a carried error from dbndiff2")
    assert next(l for l in body if "ex1_dlogprobs" in l).endswith("right")
    assert lines[-1].split() == ["total", f"{spec.total_points() - 1:g}", "/", f"{spec.total_points():g}"]


def test_a_notebooks_cells_from_a_file_or_a_dict(tmp_path):
    nb = {"cells": [{"cell_type": "code", "source": ["a = 1\n", "b = 2"], "metadata": {}}]}
    (tmp_path / "nb.ipynb").write_text(json.dumps(nb))
    assert check.load_cells(tmp_path / "nb.ipynb")[0]["source"] == "a = 1\nb = 2"
    assert check.load_cells(nb)[0]["source"] == "a = 1\nb = 2"
    with pytest.raises(check.CheckError, match="not a Jupyter notebook"):
        check.load_cells({"nbformat": 4})


def test_names_txt_beside_the_notebook_or_what_to_do(tmp_path, monkeypatch):
    monkeypatch.delenv("NAMES_TXT", raising=False)
    nb = tmp_path / "backprop_ninja.ipynb"
    with pytest.raises(check.CheckError, match="run the notebook's data cell once"):
        check.find_names_txt(nb)
    (tmp_path / "names.txt").write_text("emma\n")
    assert check.find_names_txt(nb) == tmp_path / "names.txt"


def test_in_colab_the_open_notebook_is_checked(tmp_path, monkeypatch, capsys):
    """Colab hands the open notebook over as JSON (google.colab._message): no file is needed."""
    opened = {"cells": [{"cell_type": "code", "source": "x = 1", "metadata": {}}]}
    message = types.SimpleNamespace(
        blocking_request=lambda kind, timeout_sec: {"ipynb": opened} if kind == "get_ipynb" else None
    )
    google = types.ModuleType("google")
    google.colab = types.ModuleType("google.colab")
    google.colab._message = message
    monkeypatch.setitem(sys.modules, "google", google)
    monkeypatch.setitem(sys.modules, "google.colab", google.colab)
    monkeypatch.setenv("NAMES_TXT", str(tmp_path / "elsewhere.txt"))  # beside the notebook wins
    monkeypatch.chdir(tmp_path)
    (tmp_path / "names.txt").write_text("emma\n")
    seen = {}

    def judged(nb, *, names_txt, folder, seed):
        seen.update(nb=nb, names_txt=names_txt, folder=folder)
        return _record()

    monkeypatch.setattr(check, "check_notebook", judged)
    colab.check()
    assert seen == {"nb": opened, "names_txt": tmp_path / "names.txt", "folder": tmp_path}
    assert "ex1_dbndiff2" in capsys.readouterr().out


def test_without_a_notebook_check_is_the_sandboxs(monkeypatch, capsys):
    monkeypatch.setattr(
        "grader.confine.check.sandbox_status", lambda: types.SimpleNamespace(works=True, reason="")
    )
    assert check.main([]) == 0 and capsys.readouterr().out.startswith("bubblewrap sandbox: available")


def test_a_missing_notebook_is_said(tmp_path, capsys):
    assert check.main([str(tmp_path / "absent.ipynb"), "--names-txt", str(tmp_path)]) == 2
    assert "error:" in capsys.readouterr().err


@pytest.mark.integration  # the replay's server, in a child process
def test_a_written_exercise_is_checked_by_the_definition_its_notebook_carries(tmp_path, capsys):
    """The tiny exercise's notebook (as `new` writes it, its answer cell with dW transposed):
    checked offline without names.txt, its table holding its own gradients and the judge's hint."""
    from grader.authoring.notebook import instructor_notebook

    from tiny_exercise import TINY

    nb = instructor_notebook(TINY)
    for cell in nb.cells:
        if cell.metadata["nbgrader"]["grade_id"] == "ex1_solution":
            cell.source = TINY.solution.replace("dW = X.T @ dlogits", "dW = (X.T @ dlogits).T")
    path = tmp_path / "tiny.ipynb"
    path.write_text(json.dumps(nb))
    assert check.main([str(path)]) == 0
    said = capsys.readouterr().out
    assert "ex1_dW" in said and "transposed" in said and "4 / 5" in said and "ex1_dbndiff2" not in said
