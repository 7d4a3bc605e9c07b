"""The canonical form similarity.py fingerprints: a copier's reorderings and renamings undone,
what the code does kept."""

from grader.reports.canonical import tokens

FIXED = {"torch", "dlogits", "logits"}


def test_independent_statements_in_either_order_are_one_form():
    a = "a = torch.exp(logits)\nb = torch.log(logits)\ndlogits = a + b\n"
    b = "b = torch.log(logits)\na = torch.exp(logits)\ndlogits = a + b\n"
    assert tokens(a, FIXED)[0] == tokens(b, FIXED)[0]


def test_statements_that_differ_only_in_the_students_names_are_independent():
    # both bind a name of the student's own, which the form spells "_": the order must still be
    # decided on the names as written, or the two would look dependent and keep their order
    a = "if True:\n    p = torch.exp(logits)\n    q = torch.log(logits)\n"
    b = "if True:\n    q = torch.log(logits)\n    p = torch.exp(logits)\n"
    assert tokens(a, FIXED)[0] == tokens(b, FIXED)[0]


def test_dependent_statements_keep_their_order():
    a = "x = torch.exp(logits)\nx = torch.log(x)\n"
    b = "x = torch.log(logits)\nx = torch.exp(x)\n"
    assert tokens(a, FIXED)[0] != tokens(b, FIXED)[0]


def test_own_names_are_one_placeholder_and_the_lectures_are_kept():
    found, line_of = tokens("mine = logits * 2\ndlogits = mine\n", FIXED)
    assert "mine" not in found and found.count("_") == 2
    assert {"logits", "dlogits"} <= set(found) and "2.0" in found  # 2 spelt as 2.0
    assert line_of[0] == 1 and line_of[-1] == 2
