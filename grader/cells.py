"""Notebook cell source as Python: IPython magics and shell escapes are not part of an answer."""
from __future__ import annotations

import re

_MAGIC_LINE = re.compile(r"^(\s*)[%!].*$", re.M)


def strip_magics(source: str) -> str:
    if source.lstrip().startswith("%%"):
        return ""  # a cell magic makes the whole cell not Python
    return _MAGIC_LINE.sub(r"\1pass", source)
