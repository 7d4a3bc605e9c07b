"""grader/preprocessors/prefix_block.py: which of a notebook's first cells a warm kernel takes in
one round trip, and each one's outputs and count from the answer."""

from __future__ import annotations

import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_output

from grader.preprocessors import prefix_block
from grader.untrusted.protocol import PREFIX_MODULE, TEST_CELLS_MIME

PREFIX = [
    "%matplotlib inline\nimport torch",
    "words = open('names.txt').read().split()",
    "n = len(words)",
    "x = 1",
]
SKIPPABLE = [False, True, True, True]


def _cells(sources) -> list:
    out = [new_markdown_cell("# the lecture")]
    for s in sources:
        out += [new_code_cell(s), new_markdown_cell("text")]
    return out + [new_code_cell("dlogits = None  # the student's")]


def test_the_skippable_first_cells_are_taken_from_the_first_to_the_last():
    cells = _cells(PREFIX)
    first, members = prefix_block.members(cells, PREFIX, SKIPPABLE)
    assert first == 1
    assert [cells[i].source for i in members] == PREFIX[1:]


@pytest.mark.parametrize(
    "sources",
    [PREFIX[:1] + ["print('mine')"] + PREFIX[1:], PREFIX[:2] + ["n = 0"] + PREFIX[3:], PREFIX[:2]],
    ids=["a-cell-added", "a-cell-changed", "cells-missing"],
)
def test_a_notebook_whose_first_cells_are_not_the_servers_takes_none(sources):
    assert prefix_block.members(_cells(sources), PREFIX, SKIPPABLE) == (0, [])


@pytest.mark.parametrize(
    "said",
    [None, "yes", [1, 1, 1, 1], [False, True, True, True, True], [False] * 4, [False, False, False, True]],
    ids=["none", "text", "not-booleans", "more-than-cells", "none-skippable", "only-one"],
)
def test_what_the_server_says_is_checked_before_anything_is_taken(said):
    assert prefix_block.members(_cells(PREFIX), PREFIX, said) == (0, [])


def test_the_block_cell_calls_take_with_its_nonce():
    cell, nonce = prefix_block.block_cell(1, 3)
    assert cell.source == f"__import__({PREFIX_MODULE!r}).take({nonce!r}, 1, 3)"
    assert len(nonce) == 16 and prefix_block.block_cell(1, 3)[1] != nonce


def _answer(nonce: str, texts: list[str]) -> list:
    cells = [{"stdout": t, "stderr": "", "value": None, "error": None} for t in texts]
    return [new_output("display_data", data={TEST_CELLS_MIME: {"nonce": nonce, "cells": cells}})]


def test_each_cell_gets_its_printed_text_and_the_count_it_would_have_had_alone():
    each = prefix_block.split(_answer("n1", ["32033\n", "", "27\n"]), "n1", 3, 2)
    assert [count for _, count in each] == [2, 3, 4]
    assert [[o.text for o in out] for out, _ in each] == [["32033\n"], [], ["27\n"]]


@pytest.mark.parametrize(
    "outputs, nonce, base",
    [
        (_answer("n1", ["a", "b"]), "n2", 2),
        (_answer("n1", ["a"]), "n1", 2),
        (_answer("n1", ["a", "b"]), "n1", None),
    ],
    ids=["another-nonce", "too-few-cells", "no-count"],
)
def test_an_answer_that_is_not_there_whole_gives_none(outputs, nonce, base):
    assert prefix_block.split(outputs, nonce, 2, base) is None
