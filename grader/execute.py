"""Stable import for nbgrader_config.py files written before the package was grouped:
`SandboxedExecute` is grader/preprocessors/limited_execute.py's LimitedExecute (its
`c.SandboxedExecute.*` settings still apply)."""

from .preprocessors.limited_execute import LimitedExecute


class SandboxedExecute(LimitedExecute):
    """The old name of LimitedExecute."""
