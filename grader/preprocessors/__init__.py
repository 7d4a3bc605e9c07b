"""The kit's nbgrader preprocessors, one class per module; nbgrader_config.py names them.

- LimitedExecute: nbgrader's Execute with retries, time and output bounds per submission
- NeutraliseOutputs: whatever the student's code displayed, made inert
- ReplayGrades: the judge's verdicts into the graded cells (where grades come from)
- RebuildFromSource: the instructor's notebook with the student's answers put in place
- CheckCellMetadata: nbgrader's metadata check, its schema's validator made once
- OverwriteCellsOnce, SaveAutoGradesOnce: nbgrader's, a notebook's gradebook rows read once
- UseRemoteResult: a cluster worker's autograded notebook, recorded by the coordinator
- FeedbackSummary (+ FeedbackExporter, its page): feedback that opens with every gradient's verdict

Each is imported when first asked for: the configuration names them as strings, so an nbgrader
command that grades nothing (export, generate_feedback, db) does not import torch (2.4 s of CPU).
"""

from __future__ import annotations

import importlib
import sys

from ..grading.nbgrader_main import start_up_uncollected

_MODULE_OF = {
    "CheckCellMetadata": "check_cell_metadata",
    "FeedbackExporter": "feedback_exporter",
    "FeedbackSummary": "feedback_summary",
    "LimitedExecute": "limited_execute",
    "NeutraliseOutputs": "neutralise_outputs",
    "OverwriteCellsOnce": "gradebook_rows",
    "RebuildFromSource": "rebuild_from_source",
    "ReplayGrades": "replay_grades",
    "SaveAutoGradesOnce": "gradebook_rows",
    "UseRemoteResult": "use_remote_result",
}
__all__ = sorted(_MODULE_OF)


def __getattr__(name: str):
    if name not in _MODULE_OF:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = f"{__name__}.{_MODULE_OF[name]}"
    if module not in sys.modules:
        with start_up_uncollected():  # the first notebook's import of torch and the judge
            importlib.import_module(module)
    return getattr(sys.modules[module], name)
