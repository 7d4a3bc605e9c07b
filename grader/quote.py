"""Quoting what a student wrote inside text the kit writes: a note in the notebook, a hint,
a log line. Whatever the student put there (markup, script, terminal escape codes) must
arrive as the characters they typed, never as something that acts."""

from __future__ import annotations

import html
import re

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|~<>&\"'$])")


def for_log(text: object, limit: int = 200) -> str:
    """One line for a terminal or a log file: control characters (escape codes, newlines,
    bidi overrides) shown as \\x.. escapes, long text cut."""
    s = str(text)
    s = _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), s.replace("\n", "\\n"))
    return s if len(s) <= limit else s[:limit] + "..."


def for_markdown(text: object, limit: int = 200) -> str:
    """Literal text inside a markdown cell: no markup, no HTML, no link, no math; one line."""
    s = for_log(text, limit)
    return _MARKDOWN_SPECIAL.sub(lambda m: "&#%d;" % ord(m.group()), s)


def for_html(text: object, limit: int = 2000) -> str:
    return html.escape(for_log(text, limit), quote=True)
