"""Calling the student's manual_backward with the keywords it takes (grader/untrusted/backward_call.py):
read from its signature once for a training loop, as for one call."""

from __future__ import annotations

from grader.untrusted.backward_call import accepted_arguments, accepted_names, taken

INPUTS = {"logits": 1, "h": 2, "hpreact": 3, "Yb": 4}


def named(logits, Yb, extra=None):
    return [logits, Yb]


def anything(logits, **rest):
    return [logits, *rest]


def test_only_the_keywords_a_function_names_are_passed():
    assert accepted_names(named) == {"logits", "Yb", "extra"}
    assert accepted_arguments(named, INPUTS) == {"logits": 1, "Yb": 4}


def test_a_function_with_kwargs_gets_every_input():
    assert accepted_names(anything) is None
    assert accepted_arguments(anything, INPUTS) == INPUTS


def test_names_read_once_give_what_each_call_would():
    for fn in (named, anything, lambda: []):
        names = accepted_names(fn)
        for inputs in (INPUTS, {"h": 0}, {}):
            assert taken(inputs, names) == accepted_arguments(fn, inputs)
