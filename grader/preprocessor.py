"""Stable import for nbgrader_config.py files: grader/preprocessors/replay_grades.py."""

from .preprocessors.replay_grades import *  # noqa: F403
from .preprocessors.replay_grades import ReplayGrades  # noqa: F401
