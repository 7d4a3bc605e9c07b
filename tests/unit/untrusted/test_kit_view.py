"""grader/untrusted/kit_view.py in-process (the finder is asked, not installed: this process is
the judge's): outside the sandbox, student code imports of the kit what the sandbox shows."""

from __future__ import annotations

import pytest

from grader.confine import VISIBLE_INSIDE
from grader.untrusted.kit_view import KitOutside
from grader.untrusted.protocol import KIT_INSIDE


@pytest.mark.parametrize(
    "name",
    [
        "grader.reference",
        "grader.reference.steps",
        "grader.reference.backprop_ninja.rules",
        "grader.verdicts.judge",
        "grader.settings",
    ],
)
def test_the_judge_and_the_answer_key_are_not_there(name):
    with pytest.raises(ModuleNotFoundError, match=name):
        KitOutside().find_spec(name)


@pytest.mark.parametrize(
    "name", ["grader", "grader.incell", "grader.untrusted.runner", "grader.exercise.spec", "torch"]
)
def test_what_the_sandbox_shows_is_left_to_the_other_finders(name):
    assert KitOutside().find_spec(name) is None


def test_the_sandbox_binds_the_same_files():
    assert VISIBLE_INSIDE == KIT_INSIDE
