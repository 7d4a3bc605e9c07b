"""grader/preprocessors/test_blocks.py and its kernel side, grader/untrusted/test_cells.py, in
process: which cells make a block, and each cell's outputs as nbgrader reads a test cell (the
whole round trip in a real kernel: test_limited_execute.py; on the corpus, warm and cold:
tests/e2e/test_replay_corpus.py)."""

from __future__ import annotations

import logging

from nbformat.v4 import new_code_cell, new_markdown_cell
from nbgrader.utils import determine_grade

from grader.preprocessors import test_blocks
from grader.untrusted import test_cells
from grader.untrusted.protocol import TEST_CELLS_MIME as MIME


def _cell(source="x = 1", *, grade=True, locked=True, solution=False, points=1):
    cell = new_code_cell(source)
    cell.metadata["nbgrader"] = {
        "grade": grade,
        "locked": locked,
        "solution": solution,
        "points": points,
        "grade_id": "t",
    }
    return cell


def test_a_block_is_two_or_more_test_cells_in_a_row():
    cells = [
        _cell(grade=False),  # locked code
        _cell(),
        _cell(),
        new_markdown_cell("between"),
        _cell(),  # 1, 2, 4: one block
        _cell(solution=True, grade=False, locked=False),  # an answer ends it
        _cell(),  # alone: not a block
        _cell(grade=False),
        _cell(),
        _cell("%time 1"),  # a magic: not batched
        _cell(),
        _cell(),  # at the end
    ]
    assert test_blocks.blocks(cells) == {1: [1, 2, 4], 10: [10, 11]}


def _answer(nonce, cells):
    return [{"output_type": "display_data", "data": {MIME: {"nonce": nonce, "cells": cells}}, "metadata": {}}]


def test_each_cell_gets_outputs_nbgrader_scores_as_it_would_its_own(monkeypatch):
    ns: dict = {}
    sources = ["print('ok')\n0.5", "assert False, 'no'", "y = 2", "import sys; sys.exit(3)"]
    results = [test_cells._one(i, s, ns) for i, s in enumerate(sources)]
    outs = test_blocks.split(_answer("n1", results), "n1", 4, 7)
    scores = []
    for source, out in zip(sources, outs):
        cell = _cell(source)
        cell.outputs = out
        scores.append(determine_grade(cell, logging.getLogger())[0])
    assert scores == [0.5, 0, 1, 0]
    assert outs[0][0] == {"output_type": "stream", "name": "stdout", "text": "ok\n"}
    assert outs[0][1]["execution_count"] == 7 and outs[1][0]["ename"] == "AssertionError"
    assert ns["y"] == 2  # one namespace, in order, as the cells in a row would leave it


def test_an_answer_not_there_whole_is_none():
    good = [test_cells._one(0, "1", {})]
    assert test_blocks.split(_answer("n", good), "n", 1, None) is not None
    assert test_blocks.split(_answer("forged", good), "n", 1, None) is None  # another nonce
    assert test_blocks.split(_answer("n", good), "n", 2, None) is None  # a cell short
    assert test_blocks.split(_answer("n", [{**good[0], "value": 3}]), "n", 1, None) is None
    assert test_blocks.split(_answer("n", [{**good[0], "extra": 1}]), "n", 1, None) is None
    assert test_blocks.split([], "n", 1, None) is None


def test_the_block_cell_carries_the_sources_and_a_fresh_nonce():
    cell, nonce = test_blocks.block_cell(["a = 1", "b = '''x'''"])
    other, second = test_blocks.block_cell(["a = 1"])
    assert nonce != second and nonce in cell.source and "b = '''x'''" in cell.source
    compile(cell.source, "<block>", "exec")
