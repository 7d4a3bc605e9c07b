"""Stable import for nbgrader_config.py files: grader/preprocessors/rebuild_from_source.py."""

from .preprocessors.rebuild_from_source import *  # noqa: F403
from .preprocessors.rebuild_from_source import RebuildFromSource  # noqa: F401
