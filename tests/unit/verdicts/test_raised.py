"""grader/verdicts/raised.py: a gradient its own cell did not compute. The hint is the student's
own exception on their line, with what the notebook calls a name they lacked; a stub left in
place says so; a name of their own is suggested only if it is not another gradient's."""

from __future__ import annotations

from grader.verdicts import raised

SHAPES = "RuntimeError: mat1 and mat2 shapes cannot be multiplied (32x27 and 64x27)"


def _error(line: int, error: str, assigns=(), cell="ex1_solution") -> dict:
    return {"cell": cell, "line": line, "error": error, "assigns": list(assigns)}


def test_the_statement_that_assigns_it_and_raised_is_the_hint():
    errors = [_error(12, SHAPES, ["dh"])]
    text = raised.raised("dh", errors, names=["dlogits"])
    assert "line 12" in text and "ex1_solution" in text and SHAPES in text
    assert raised.raised("dW2", errors, names=["dlogits"]) is None  # not blamed on another gradient


def test_an_undefined_name_is_named_with_what_the_notebook_has_instead():
    def said(missing, names=("n", "Yb", "batch_size", "dbndiff")):
        error = _error(3, f"NameError: name '{missing}' is not defined", ["dlogits"])
        return raised.raised("dlogits", [error], names=list(names))

    first = "`BATCH_SIZE` is not defined when your line runs (ex1_solution, line 3)"
    assert said("BATCH_SIZE").startswith(first)
    assert "batch size is `n`" in said("BATCH_SIZE") and "batch size is `n`" in said("N")
    assert "labels are `Yb`" in said("Y_batch") and "labels are `Yb`" in said("yb")
    assert "did you mean `dbndiff`?" in said("dbndif")
    # a form of a notebook name under the student's own name: not a spelling of another gradient
    assert said("demb_flat", names=("demb", "dembcat")).endswith(
        "define it in this cell before this line (from `demb`?)"
    )
    assert "assigned later" in said("dbndiff_sq", names=("dbndiff_sq",))
    assert "use the lecture's name" in said("my_own_thing")


def test_the_stub_comes_before_any_guess():
    errors = [_error(2, "NotImplementedError: ", cell="ex2_solution")]
    text = raised.unassigned("dlogits", names=["dlogits_1", "dlogits_2"], errors=errors)
    assert "stub" in text and "dlogits_1" not in text


def test_a_name_of_the_students_own_is_suggested_but_never_another_gradient():
    text = raised.unassigned("dbndiff2", names=["dbndiff", "dbnsqdiff", "bndiff2"], errors=[])
    assert "`dbnsqdiff`" in text and "name it `dbndiff2`" in text
    assert "`dbndiff`" not in text and "`bndiff2`" not in text  # another gradient; a forward name
    assert "assign it in the answer cell" in raised.unassigned("dbndiff2", names=["dbndiff"], errors=[])


def test_only_the_gradients_own_cell_is_read():
    errors = [_error(2, "NameError: name 'x' is not defined", ["dhprebn"], cell="ex3_solution")]
    assert raised.in_cell(errors, "ex1_solution") == []
    assert raised.in_cell(errors, "ex3_solution") == errors


def test_a_name_holding_the_gradients_value_is_named_before_any_spelling_guess():
    text = raised.unassigned("dbndiff2", names=["dbnsqdif"], errors=[], renamed="grad_sq")
    assert text == "dbndiff2 is not defined, but `grad_sq` holds exactly its value: name it `dbndiff2`"
    stub = [_error(2, "NotImplementedError: ")]
    assert "stub" in raised.unassigned("dbndiff2", names=[], errors=stub, renamed="grad_sq")
