"""Blocks of consecutive hidden-test cells, each run in one kernel round trip by LimitedExecute
(grader/untrusted/test_cells.py runs them in the kernel). A cell costs about 7 ms of message
handling on top of its own work (4 in ipykernel, 3 in nbclient), and the lecture's exercise-1
tests are 26 cells in a row: one round trip for them all instead of 26.

A block is two or more code cells in a row (markdown between them is fine) that are graded,
locked and not answers: the kit's hidden tests, put back from the source, so the same for every
student. Each gets back outputs of its own, as nbgrader reads a test cell: what it printed, an
error if it raised, its value as the result. Those outputs only feed the kernel flag: the replay
replaces them with its verdicts. Where the block's answer does not come back whole (a student's
code broke the kernel's display, say), its cells run one at a time as before.
"""

from __future__ import annotations

import secrets

from nbformat.notebooknode import NotebookNode, from_dict
from nbgrader.utils import is_grade, is_solution

from ..exercise.cells import strip_magics
from ..untrusted.protocol import TEST_CELLS_MIME as MIME

KEYS = ("stdout", "stderr", "value", "error")


def _test_cell(cell: NotebookNode) -> bool:
    """A test cell (graded, not an answer: locked, for nbgrader) without magics."""
    return is_grade(cell) and not is_solution(cell) and strip_magics(cell.source) == cell.source


def blocks(cells: list[NotebookNode]) -> dict[int, list[int]]:
    """First cell's index -> the indices of its block's cells."""
    out: dict[int, list[int]] = {}
    run: list[int] = []
    for i, cell in enumerate(cells):
        if cell.cell_type != "code":
            continue
        if _test_cell(cell):
            run.append(i)
            continue
        if len(run) > 1:
            out[run[0]] = run
        run = []
    if len(run) > 1:
        out[run[0]] = run
    return out


def block_cell(sources: list[str]) -> tuple[NotebookNode, str]:
    """The one cell that runs `sources` in the kernel, and the nonce its answer carries."""
    nonce = secrets.token_hex(8)
    call = (
        f"__import__('grader.untrusted.test_cells', fromlist=['run']).run({nonce!r}, {sources!r}, globals())"
    )
    return code_cell(call), nonce


def code_cell(source: str) -> NotebookNode:
    """A code cell the grader sends in place of the notebook's (this block's, prefix_block.py's)."""
    return from_dict(
        {"cell_type": "code", "source": source, "metadata": {}, "outputs": [], "execution_count": None}
    )


def split(outputs: list, nonce: str, n: int, execution_count) -> list[list] | None:
    """Each cell's own outputs from the block cell's; None if the answer is not there whole."""
    answers = [
        o["data"][MIME]
        for o in outputs
        if o.get("output_type") == "display_data" and isinstance(o.get("data", {}).get(MIME), dict)
    ]
    answer = next((a for a in answers if a.get("nonce") == nonce), None)
    cells = answer.get("cells") if answer else None
    if not isinstance(cells, list) or len(cells) != n or not all(_well_formed(c) for c in cells):
        return None
    return [_outputs(c, execution_count) for c in cells]


def _well_formed(c) -> bool:
    if not isinstance(c, dict) or set(c) != set(KEYS):
        return False
    texts = all(isinstance(c[k], str) for k in ("stdout", "stderr")) and isinstance(
        c["value"], (str, type(None))
    )
    error = c["error"]
    return texts and (
        error is None
        or isinstance(error, dict)
        and isinstance(error.get("ename"), str)
        and isinstance(error.get("evalue"), str)
        and isinstance(error.get("traceback"), list)
        and all(isinstance(line, str) for line in error["traceback"])
    )


def _outputs(c: dict, execution_count) -> list:
    out = [
        from_dict({"output_type": "stream", "name": name, "text": c[name]})
        for name in ("stdout", "stderr")
        if c[name]
    ]
    if c["error"]:
        e = c["error"]
        out.append(
            from_dict(
                {
                    "output_type": "error",
                    "ename": e["ename"],
                    "evalue": e["evalue"],
                    "traceback": e["traceback"],
                }
            )
        )
    elif c["value"] is not None:
        result = {"text/plain": c["value"]}
        out.append(
            from_dict(
                {
                    "output_type": "execute_result",
                    "execution_count": execution_count,
                    "metadata": {},
                    "data": result,
                }
            )
        )
    return out
