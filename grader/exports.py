"""Stable entry point: the export plugins of grader/course/exports.py, for
`nbgrader export --exporter=grader.exports.GradientsExportPlugin` (and Canvas/Moodle)."""

from .course.exports import *  # noqa: F403
from .course.exports import CanvasExportPlugin, GradientsExportPlugin, MoodleExportPlugin

__all__ = ["GradientsExportPlugin", "CanvasExportPlugin", "MoodleExportPlugin"]
