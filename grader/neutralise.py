"""Stable import for nbgrader_config.py files: grader/preprocessors/neutralise_outputs.py."""

from .preprocessors.neutralise_outputs import *  # noqa: F403
from .preprocessors.neutralise_outputs import NeutraliseOutputs  # noqa: F401
