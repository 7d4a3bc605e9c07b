"""FeedbackExporter: nbgrader's feedback page with the kit's summary (FeedbackSummary) where
nbgrader lists "Test cell (Score: ...)" links; the cells follow as nbgrader renders them.

Enable in nbgrader_config.py: `c.GenerateFeedback.exporter_class = FeedbackExporter`. A class
of its own rather than `c.HTMLExporter.*`: the formgrader renders with HTMLExporter too, and
nbgrader's API (the formgrader's "generate feedback") pins HTMLExporter.template_name to
"feedback". This template extends that one, so whatever pins it still gets the kit's page.
The template is a string here, not a file, so a non-editable install needs no package data.
"""

from __future__ import annotations

import copy

from nbconvert.exporters import HTMLExporter, TemplateExporter
from nbconvert.filters.highlight import Highlight2HTML
from nbconvert.filters.widgetsdatatypefilter import WidgetsDataTypeFilter
from nbformat.notebooknode import NotebookNode
from traitlets import default

__all__ = ["FeedbackExporter", "NO_ALT", "TEMPLATE"]

NO_ALT = "No description has been provided for this image"  # nbconvert's words for an image without
IMAGES = ("image/png", "image/jpeg")  # the only images NeutraliseOutputs keeps

# 'index.html.j2' is the first on the template path: nbgrader's feedback/index.html.j2. Without
# FeedbackSummary's data the page is nbgrader's own (super()).
TEMPLATE = """{%- extends 'index.html.j2' -%}
{% block body %}
{%- if resources.feedback_summary and resources.feedback_summary.html -%}
<body>
  <a name="top"></a>
  <div class="container">
    <div class="panel panel-default">
      <div class="panel-heading">
        {%- set score = resources.nbgrader.score | float | round(2) %}
        {%- set max_score = resources.nbgrader.max_score | float | round(2) %}
        <h4>{{ resources.nbgrader.notebook | e }} (Score: {{ score }} / {{ max_score }})</h4>
        <div id="summary">
        {{ resources.feedback_summary.html }}
        </div>
        {%- for cell in nb.cells if cell.metadata.nbgrader and cell.metadata.nbgrader.comment %}
        {%- if loop.first %}<p>Comments from your grader:</p><ul>{% endif %}
        <li><a href="#comment-{{ cell.metadata.nbgrader.grade_id | e }}">
          {{ cell.metadata.nbgrader.grade_id | e }}</a></li>
        {%- if loop.last %}</ul>{% endif %}
        {%- endfor %}
      </div>
      <div class="panel-body">
        <div id="notebook" class="border-box-sizing">
          <div class="container" id="notebook-container">
            {{ self.body_loop() }}
          </div>
        </div>
      </div>
    </div>
  </div>
</body>
{%- else -%}
{{ super() }}
{%- endif -%}
{% endblock body %}
"""


class FeedbackExporter(HTMLExporter):
    @default("template_name")
    def _feedback_template(self):
        return "feedback"  # GenerateFeedback sets it too; this template extends its index

    @default("raw_template")
    def _kit_template(self):
        return TEMPLATE

    def from_notebook_node(self, nb: NotebookNode, resources: dict | None = None, **kw):
        """HTMLExporter's page without its last pass, which parses the whole page again with
        BeautifulSoup to give images alt text and the lab template's cells a tabindex: two thirds
        of a feedback page's time. This page is the classic template's (no lab cells), and its
        images get the same alt text from their metadata, which the template reads."""
        info = nb.metadata.get("language_info", {})
        lexer = info.get("pygments_lexer", info.get("name"))
        resources = self._init_resources(resources)
        self.register_filter(
            "highlight_code",
            self.filters.get("highlight_code", Highlight2HTML(pygments_lexer=lexer, parent=self)),
        )
        self.register_filter(
            "filter_data_type",
            WidgetsDataTypeFilter(notebook_metadata=self._nb_metadata, parent=self, resources=resources),
        )
        return TemplateExporter.from_notebook_node(self, with_alt_text(nb), resources, **kw)


def with_alt_text(nb: NotebookNode) -> NotebookNode:
    """`nb` where every image output without alt text (its own or its cell's) has nbconvert's:
    a copy, or `nb` itself where no image lacks it (most feedback pages have no image)."""
    if not any(_without_alt(c, o) for c in nb.cells for o in c.get("outputs", [])):
        return nb
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            for mime in _without_alt(cell, output):
                meta = output.get("metadata") if isinstance(output.get("metadata"), dict) else {}
                own = meta.get(mime)
                meta[mime] = {**(own if isinstance(own, dict) else {}), "alt": NO_ALT}
                output["metadata"] = meta
    return nb


def _without_alt(cell, output) -> list[str]:
    """The image types `output` shows without alt text."""
    meta = output.get("metadata") if isinstance(output.get("metadata"), dict) else {}
    if _alt(cell.get("metadata")) or _alt(meta):
        return []
    return [m for m in IMAGES if m in output.get("data", {}) and not _alt(meta.get(m))]


def _alt(meta) -> bool:
    return isinstance(meta, dict) and bool(meta.get("alt"))
