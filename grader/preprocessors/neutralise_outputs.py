"""Make the autograded notebook inert: nothing a student produced runs as script wherever a
TA or the student views it (the formgrader, the feedback HTML, Jupyter).

Those views put a code cell's HTML, JavaScript and SVG outputs into the page as they are,
image data and output metadata into `<img>` attributes, and raw HTML of markdown cells into
the page; the student's kernel decides all of it. So the notebook itself is cleaned, right
after the kernel ran it, and no view has to be trusted: outputs keep text, valid PNG/JPEG
and allowlisted HTML; the student's own markdown and raw cells become literal text.
"""

from __future__ import annotations

import base64
import binascii
import re
from pathlib import Path

import bleach
from nbconvert.exporters.exporter import ResourcesDict
from nbformat.notebooknode import NotebookNode, from_dict
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import List, Unicode

from ..exercise.cells import nbgrader_meta
from ..quote import for_log
from .rebuild_from_source import NOTE_MARK
from .scope import instructor_notebook

__all__ = ["NeutraliseOutputs", "literal_markdown"]

# Tables and plain formatting: none of these can load or run anything.
HTML_TAGS = [
    "table",
    "thead",
    "tbody",
    "tfoot",
    "tr",
    "th",
    "td",
    "caption",
    "p",
    "br",
    "hr",
    "b",
    "i",
    "u",
    "em",
    "strong",
    "small",
    "sub",
    "sup",
    "code",
    "pre",
    "span",
    "div",
    "ul",
    "ol",
    "li",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "blockquote",
    "a",
    "abbr",
]
# No style (CSS can fetch and overlay), no class (it could borrow the page's own look).
_CELL_ATTRS = {"colspan", "rowspan"}
_IMAGE_MAGIC = {"image/png": b"\x89PNG\r\n\x1a\n", "image/jpeg": b"\xff\xd8\xff"}
_BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")
_WHITESPACE = re.compile(r"\s+")
_BACKTICKS = re.compile(r"`+")
# What IPython shows as text/plain for Markdown(), Latex(), Math(): the source says more.
_PLACEHOLDER = re.compile(r"<[\w.]+ object( at 0x[0-9a-fA-F]+)?>")
_KIND = {
    "text/html": "HTML",
    "application/javascript": "JavaScript",
    "image/svg+xml": "SVG",
    "image/png": "image",
    "image/jpeg": "image",
}


def _allowed_attribute(tag: str, name: str, value: str) -> bool:
    """Only absolute http(s) links: a relative one would open a file of the submission
    (served by the formgrader on the TA's origin), any other scheme could be script."""
    if tag == "a" and name == "href":
        return re.match(r"https?://[^\s]", value, re.I) is not None
    if tag in ("a", "abbr") and name == "title":
        return True
    return tag in ("th", "td") and name in _CELL_ATTRS and value.isdigit()


def _text(value) -> str:
    """nbformat allows a string or a list of strings; a crafted output may hold anything."""
    if isinstance(value, list):
        return "".join(v if isinstance(v, str) else str(v) for v in value)
    return value if isinstance(value, str) else ("" if value is None else str(value))


def _count(value):
    """Views print execution counts into the page unescaped: only a number may be one."""
    return value if type(value) is int else None


def valid_image(data, mimetype: str) -> str | None:
    """The base64 text of a real PNG or JPEG, without whitespace, or None: views put it into
    an `src` attribute as it is, so a quote in it would end the attribute."""
    text = _WHITESPACE.sub("", _text(data))
    if not text or len(text) % 4 or not _BASE64.fullmatch(text):
        return None
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    return text if raw.startswith(_IMAGE_MAGIC[mimetype]) else None


def literal_markdown(source: str) -> str:
    """Markdown that shows `source` as the characters typed: a fenced code block (escaped by
    every renderer, skipped by MathJax) whose fence no backtick run inside can close."""
    longest = max((len(run) for run in _BACKTICKS.findall(source)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{source}\n{fence}"


def _kind(mimetype: str) -> str:
    if mimetype in _KIND:
        return _KIND[mimetype]
    return "widget" if "widget" in mimetype else "rich"


class NeutraliseOutputs(NbGraderPreprocessor):
    """Autograde step: right after the kernel ran the notebook (LimitedExecute)."""

    html_tags = List(
        Unicode(),
        HTML_TAGS,
        help="HTML tags kept in text/html outputs (their "
        "attributes are fixed: cell spans, http(s) links, titles).",
    ).tag(config=True)
    note = Unicode(
        "[{kinds} output removed by the autograder]",
        help="The text/plain left where active or unknown output was removed and no text remained.",
    ).tag(config=True)

    def preprocess(self, nb: NotebookNode, resources: ResourcesDict) -> tuple[NotebookNode, ResourcesDict]:
        self._removed: dict[str, int] = {}
        instructor = self._instructor_cells(resources)
        nb.metadata.pop("widgets", None)  # widget state makes views load the widget manager's script
        for index, cell in enumerate(nb.cells):
            if cell.cell_type == "code":
                cell.execution_count = _count(cell.get("execution_count"))
                cell.outputs = [o for o in map(self._output, cell.get("outputs", [])) if o is not None]
            elif index == 0 and cell.cell_type == "markdown" and cell.metadata.get(NOTE_MARK):
                continue  # the kit's own note (rebuild_from_source.py quotes what it cites)
            elif not self._is_instructors(cell, instructor):
                nb.cells[index] = self._literal(cell, instructor)
        if self._removed:
            student = resources.get("nbgrader", {}).get("student", "?")
            self.log.warning(
                "%s: removed from the notebook (active or unknown content): %s",
                for_log(student),
                ", ".join(f"{n} {what}" for what, n in sorted(self._removed.items())),
            )
        return nb, resources

    def _instructor_cells(self, resources: ResourcesDict) -> dict[str, tuple[str, str]]:
        """The source notebook's cells by grade id. Without it no cell passes as the
        instructor's: a student can copy nbgrader metadata onto a cell, not the source."""
        info = resources.get("nbgrader", {})
        coursedir = CourseDirectory(config=self.config)
        path = (
            Path(coursedir.root)
            / coursedir.source_directory
            / str(info.get("assignment"))
            / f"{info.get('notebook')}.ipynb"
        )
        if not info or not path.is_file():
            self.log.warning("no source notebook at %s: every markdown cell is shown as text", for_log(path))
            return {}
        source = instructor_notebook(path)
        return {
            nbgrader_meta(c)["grade_id"]: (c.cell_type, c.source)
            for c in source.cells
            if nbgrader_meta(c).get("grade_id")
        }

    @staticmethod
    def _is_instructors(cell: NotebookNode, instructor: dict[str, tuple[str, str]]) -> bool:
        gid = nbgrader_meta(cell).get("grade_id")
        return isinstance(gid, str) and instructor.get(gid) == (cell.cell_type, cell.source)

    def _literal(self, cell: NotebookNode, instructor: dict[str, tuple[str, str]]) -> NotebookNode:
        """A student's markdown or raw cell as a markdown cell showing its source verbatim.
        Attachments and other metadata go (a raw cell's format makes views paste it in);
        nbgrader's stays on an answer cell the assignment knows, so it is still graded."""
        if cell.cell_type not in ("markdown", "raw"):
            self._drop(f"{for_log(cell.cell_type, 20)} cell")
        meta = nbgrader_meta(cell)
        known = meta.get("grade_id") in instructor
        cell.cell_type, cell.source = "markdown", literal_markdown(_text(cell.get("source", "")))
        for key in ("attachments", "outputs", "execution_count"):
            cell.pop(key, None)
        cell.metadata = from_dict({"nbgrader": meta} if known else {})
        return cell

    def _drop(self, what: str) -> None:
        self._removed[what] = self._removed.get(what, 0) + 1

    def _output(self, out: NotebookNode) -> NotebookNode | None:
        """A fresh output holding only what is known to be inert; None if nothing is left."""
        kind = out.get("output_type")
        if kind == "stream":
            name = out.get("name") if out.get("name") in ("stdout", "stderr") else "stdout"
            return from_dict({"output_type": "stream", "name": name, "text": _text(out.get("text"))})
        if kind == "error":
            traceback = out.get("traceback")
            return from_dict(
                {
                    "output_type": "error",
                    "ename": _text(out.get("ename")),
                    "evalue": _text(out.get("evalue")),
                    "traceback": [_text(t) for t in traceback] if isinstance(traceback, list) else [],
                }
            )
        if kind in ("display_data", "execute_result"):
            data = self._bundle(out.get("data"))
            if not data:
                return None
            new = {"output_type": kind, "metadata": {}, "data": data}
            if kind == "execute_result":
                new["execution_count"] = _count(out.get("execution_count"))
            return from_dict(new)
        self._drop("output of an unknown type")
        return from_dict(
            {
                "output_type": "display_data",
                "metadata": {},
                "data": {"text/plain": self.note.format(kinds="unknown")},
            }
        )

    def _bundle(self, data) -> dict[str, str]:
        """The inert part of a mime bundle; a note where only active content was."""
        data = data if isinstance(data, dict) else {}
        out, dropped = {}, []
        for mimetype, value in data.items():
            if mimetype == "text/plain":
                out[mimetype] = _text(value)
            elif mimetype in _IMAGE_MAGIC and (image := valid_image(value, mimetype)):
                out[mimetype] = image
            elif mimetype == "text/html":
                out[mimetype] = self._html(_text(value))
            elif mimetype not in ("text/markdown", "text/latex"):
                dropped.append(_kind(str(mimetype)))
                self._drop(f"{dropped[-1]} output")
        plain = out.get("text/plain")
        if plain is None or _PLACEHOLDER.fullmatch(plain.strip()):
            source = data.get("text/markdown", data.get("text/latex"))
            if source is not None:
                out["text/plain"] = _text(source)  # shown as text, in <pre>, never rendered
        if dropped and "text/plain" not in out:
            out["text/plain"] = self.note.format(kinds="/".join(dict.fromkeys(dropped)))
        return out

    def _html(self, html: str) -> str:
        """Allowlisted tags, escaped everything else; kept out of MathJax's reach too."""
        clean = bleach.clean(
            html,
            tags=self.html_tags,
            attributes=_allowed_attribute,
            protocols=["http", "https"],
            strip=False,
            strip_comments=True,
        )
        return f'<div class="tex2jax_ignore mathjax_ignore">{clean}</div>'
