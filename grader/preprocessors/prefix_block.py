"""A warm kernel's first cells in one round trip. Its server has run the notebook's leading locked
cells once and kept what each printed (grader/untrusted/kernel_prefix.py); a kernel replays the
skippable ones instead of running them. Sent one by one, each still cost a round trip (about 7 ms
of message handling, 4 in ipykernel, 3 in nbclient, for a cell that only prints): 7 of a Backprop
Ninja kernel's 25 (the first, with a magic, and the last, whose value it shows, really run).
LimitedExecute sends them as one cell that IPython does not count (store_history=False),
`Prefix.take`, which stores each cell in the history under its own count, and gives each its own
printed text back as a test block's cells are given theirs (test_blocks.py).
Each cell gets the count it would have had run alone: the notebook is a cold kernel's, counts,
outputs and `In` alike. Where the answer does not come back whole, each cell is sent on its own.
"""

from __future__ import annotations

import secrets

from nbformat.notebooknode import NotebookNode

from ..untrusted.protocol import PREFIX_TAKE
from . import test_blocks


def members(cells: list[NotebookNode], prefix: list[str], skippable) -> tuple[int, list[int]]:
    """(the first skippable cell's place among the server's first cells, the notebook indices of
    the skippable cells), or (0, []) where there is no block. `skippable` is what the server said,
    checked here; the notebook's first code cells must be the server's, in order."""
    if not isinstance(skippable, list) or not all(isinstance(b, bool) for b in skippable):
        return 0, []
    if len(skippable) > len(prefix) or True not in skippable:
        return 0, []
    first, end = skippable.index(True), len(skippable)
    codes = [i for i, cell in enumerate(cells) if cell.cell_type == "code"][:end]
    same = len(codes) == end and all(cells[i].source == prefix[j] for j, i in enumerate(codes))
    if not same or not all(skippable[first:]) or end - first < 2:
        return 0, []
    return first, codes[first:]


def block_cell(first: int, count: int) -> tuple[NotebookNode, str]:
    """The one cell that takes them, and the nonce its answer carries."""
    nonce = secrets.token_hex(8)
    source = PREFIX_TAKE.format(nonce=nonce, first=first, count=count)
    return test_blocks.code_cell(source), nonce


def split(outputs: list, nonce: str, count: int, base) -> list[tuple[list, int]] | None:
    """Each cell's outputs and count, the first counted `base`, as a cold kernel counts them; None
    where the answer is not there whole (or the block cell got no count)."""
    if not isinstance(base, int):
        return None
    each = test_blocks.split(outputs, nonce, count, None)
    return None if each is None else [(out, base + i) for i, out in enumerate(each)]
