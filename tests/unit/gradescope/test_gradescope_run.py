"""run_autograder's choices before any grading: which notebook (the zip's exercise's), which
student, and a results.json with a reason when there is nothing to grade."""

from __future__ import annotations

import json

from grader.exercise import spec
from grader.gradescope import run

NOTEBOOK = spec.NOTEBOOK


def _meta(tmp_path, users):
    path = tmp_path / "submission_metadata.json"
    path.write_text(json.dumps({"id": 99, "users": users, "assignment": {"title": "hw"}}))
    return path


def test_student_is_the_gradescope_user_id(tmp_path):
    assert run.student_id(_meta(tmp_path, [{"email": "a@x", "id": 1234, "name": "A"}])) == ("1234", None)


def test_a_group_is_graded_as_its_lowest_id_whatever_the_order(tmp_path):
    users = [{"id": 1000}, {"id": 999}, {"id": 2000}]
    assert run.student_id(_meta(tmp_path, users))[0] == "999"
    assert run.student_id(_meta(tmp_path, users[::-1]))[0] == "999"


def test_odd_ids_become_folder_names(tmp_path):
    assert run.student_id(_meta(tmp_path, [{"id": "../x y"}]))[0] == "___x_y"


def test_no_metadata_is_anonymous_with_a_note(tmp_path):
    student, note = run.student_id(tmp_path / "missing.json")
    assert student == run.ANONYMOUS and "no user" in note
    assert run.student_id(_meta(tmp_path, []))[0] == run.ANONYMOUS


def test_the_named_notebook_wins(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "backprop_ninja.ipynb").write_text("{}")
    (tmp_path / "scratch.ipynb").write_text("{}")
    assert run.find_notebook(tmp_path, NOTEBOOK) == (tmp_path / "sub" / "backprop_ninja.ipynb", None)


def test_the_zips_exercise_names_the_notebook(tmp_path):
    (tmp_path / "backprop_ninja.ipynb").write_text("{}")
    (tmp_path / "gpt_block.ipynb").write_text("{}")
    assert run.find_notebook(tmp_path, "gpt_block") == (tmp_path / "gpt_block.ipynb", None)
    (tmp_path / "gpt_block.ipynb").unlink()
    assert run.find_notebook(tmp_path, "gpt_block") == (tmp_path / "backprop_ninja.ipynb", None)
    (tmp_path / "x.ipynb").write_text("{}")
    assert "none is named gpt_block.ipynb" in run.find_notebook(tmp_path, "gpt_block")[1]


def test_the_only_notebook_is_taken_whatever_its_name(tmp_path):
    (tmp_path / "My Work (1).ipynb").write_text("{}")
    (tmp_path / ".ipynb_checkpoints").mkdir()
    (tmp_path / ".ipynb_checkpoints" / "old.ipynb").write_text("{}")
    assert run.find_notebook(tmp_path, NOTEBOOK) == (tmp_path / "My Work (1).ipynb", None)


def test_none_or_several_unnamed_notebooks_say_why(tmp_path):
    nb, why = run.find_notebook(tmp_path, NOTEBOOK)
    assert nb is None and "no notebook" in why
    (tmp_path / "a.ipynb").write_text("{}")
    (tmp_path / "b.ipynb").write_text("{}")
    nb, why = run.find_notebook(tmp_path, NOTEBOOK)
    assert nb is None and "a.ipynb, b.ipynb" in why and "backprop_ninja.ipynb" in why


def test_a_link_is_not_a_submission(tmp_path):
    (tmp_path / "backprop_ninja.ipynb").symlink_to("/etc/passwd")
    assert run.find_notebook(tmp_path, NOTEBOOK)[0] is None


def test_nothing_to_grade_still_writes_results(tmp_path):
    (tmp_path / "submission").mkdir()
    (tmp_path / "submission" / "notes.txt").write_text("sorry")
    out = run.run(root=tmp_path)
    data = json.loads((tmp_path / "results" / "results.json").read_text())
    assert data["score"] == 0.0 and data["tests"] == []
    assert "no notebook" in data["output"]
    assert out.score == 0.0


def test_a_failing_grader_still_writes_results(tmp_path, capsys):
    (tmp_path / "submission").mkdir()
    (tmp_path / "submission" / "backprop_ninja.ipynb").write_text("{}")
    run.run(root=tmp_path)  # no source/course: grading cannot start
    data = json.loads((tmp_path / "results" / "results.json").read_text())
    assert data["score"] == 0.0 and "autograder failed" in data["output"]
    assert "Traceback" in capsys.readouterr().err


def test_a_zip_for_an_assignment_its_course_lacks_fails_for_staff(tmp_path, capsys):
    (tmp_path / "source" / "course" / "source").mkdir(parents=True)
    (tmp_path / "source" / "gradescope.json").write_text(json.dumps({"assignment": "tiny"}))
    (tmp_path / "submission").mkdir()
    (tmp_path / "submission" / "tiny.ipynb").write_text("{}")
    run.run(root=tmp_path)
    data = json.loads((tmp_path / "results" / "results.json").read_text())
    assert data["score"] == 0.0 and "autograder failed" in data["output"]
    assert "tiny is not an exercise the kit grades" in capsys.readouterr().err


def test_the_staff_log_has_one_line_per_flag(capsys):
    flags = [
        {"kind": "autograd", "evidence": "ex1_solution, line 1: reads .grad", "grade_ids": ["ex1_dW1"]},
        {"kind": "kernel", "evidence": "ex1_dW1 matched autograd in the student's kernel", "grade_ids": []},
    ]
    run._log({"seed": 7, "replay_seconds": 1.5, "problems": ["run ex3: timeout"], "flags": flags}, "a note")
    assert capsys.readouterr().out.splitlines() == [
        "seed 7, replay 1.5 s",
        "problem: a note",
        "problem: run ex3: timeout",
        "suspicious: autograd: ex1_solution, line 1: reads .grad",
        "suspicious: kernel: ex1_dW1 matched autograd in the student's kernel",
    ]
