"""FeedbackExporter: nbgrader's feedback page with the kit's summary (FeedbackSummary) where
nbgrader lists "Test cell (Score: ...)" links; the cells follow as nbgrader renders them.

Enable in nbgrader_config.py: `c.GenerateFeedback.exporter_class = FeedbackExporter`. A class
of its own rather than `c.HTMLExporter.*`: the formgrader renders with HTMLExporter too, and
nbgrader's API (the formgrader's "generate feedback") pins HTMLExporter.template_name to
"feedback". This template extends that one, so whatever pins it still gets the kit's page.
The template is a string here, not a file, so a non-editable install needs no package data.
"""

from __future__ import annotations

from nbconvert.exporters import HTMLExporter
from traitlets import default

__all__ = ["FeedbackExporter", "TEMPLATE"]

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
