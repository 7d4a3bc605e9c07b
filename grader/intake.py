"""Stable import for nbgrader_config.py files: grader/course/intake.py."""

from .course.intake import *  # noqa: F403
from .course.intake import ACTIVE_FILE_PATTERNS, before_autograde  # noqa: F401
