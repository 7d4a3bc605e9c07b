"""The kit's nbgrader preprocessors, one class per module; nbgrader_config.py lists them.

- LimitedExecute: nbgrader's Execute with retries, time and output bounds per submission
- NeutraliseOutputs: whatever the student's code displayed, made inert
- ReplayGrades: the judge's verdicts into the graded cells (where grades come from)
- RebuildFromSource: the instructor's notebook with the student's answers put in place
- UseRemoteResult: a cluster worker's autograded notebook, recorded by the coordinator
- FeedbackSummary (+ FeedbackExporter, its page): feedback that opens with every gradient's verdict
"""

from .feedback_exporter import FeedbackExporter
from .feedback_summary import FeedbackSummary
from .limited_execute import LimitedExecute
from .neutralise_outputs import NeutraliseOutputs
from .rebuild_from_source import RebuildFromSource
from .replay_grades import ReplayGrades
from .use_remote_result import UseRemoteResult

__all__ = [
    "FeedbackExporter",
    "FeedbackSummary",
    "LimitedExecute",
    "NeutraliseOutputs",
    "RebuildFromSource",
    "ReplayGrades",
    "UseRemoteResult",
]
