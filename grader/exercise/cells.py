"""Notebook cells as the grader reads them: the source as Python (IPython magics and shell
escapes are not part of an answer), and the nbgrader metadata; and how wide the kit writes."""

from __future__ import annotations

import re

_MAGIC_LINE = re.compile(r"^(\s*)[%!].*$", re.M)
# A verdict's output lines are wrapped at TEXT_WIDTH columns (a notebook shows output as it is:
# a hint quoting an error ran past the formgrader's right edge); a continuation starts CONTINUED.
TEXT_WIDTH = 100
CONTINUED = "      "


# Cell magics whose body is plain Python run in the current namespace.
_TRANSPARENT_CELL_MAGICS = {"time", "timeit", "capture", "prun"}


def strip_magics(source: str) -> str:
    stripped = source.lstrip()
    if stripped.startswith("%%"):
        first, _, body = stripped.partition("\n")
        if first[2:].split()[0:1] and first[2:].split()[0] in _TRANSPARENT_CELL_MAGICS:
            return "pass\n" + _MAGIC_LINE.sub(r"\1pass", body)  # keeps line numbers
        return ""  # any other cell magic makes the whole cell not Python
    return _MAGIC_LINE.sub(r"\1pass", source)


def nbgrader_meta(cell) -> dict:
    """A cell's nbgrader metadata: {} for a cell nbgrader does not know, or whose metadata a
    student made something other than a dict."""
    meta = cell.get("metadata") if isinstance(cell, dict) else None
    meta = meta.get("nbgrader") if isinstance(meta, dict) else None
    return meta if isinstance(meta, dict) else {}
