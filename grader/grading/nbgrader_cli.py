"""nbgrader as a subprocess, started one way: this Python's nbgrader (`python -m
grader.grading.nbgrader_main`: nbgrader's command line, its imports trimmed), in the course
folder, with this Python's bin/ first on PATH (nbgrader shells out to alembic, which must be this
installation's too). A cluster worker (remote.py), the Gradescope run (gradescope/course.py) and
the tests start it here, each with its own handling of the output and its own timeout; the
batch's server (nbgrader_forks.py), which forks each local worker's nbgrader, with this Python
and this environment too.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

BIN = Path(sys.executable).parent  # a virtualenv's scripts are beside its python
NBGRADER = [sys.executable, "-m", "grader.grading.nbgrader_main"]


def nbgrader_env(more_bins: Sequence[str] = ()) -> dict[str, str]:
    """This process's environment with this Python's bin/, then `more_bins`, first on PATH."""
    return dict(os.environ, PATH=os.pathsep.join([str(BIN), *more_bins, os.environ.get("PATH", "")]))


def nbgrader_call(course: Path, *args: str, more_bins: Sequence[str] = ()) -> dict:
    """What subprocess.run and subprocess.Popen take to run `nbgrader ARGS` in `course`: the
    command (run by this Python, wherever its scripts are), the working folder, the environment."""
    return {"args": [*NBGRADER, *args], "cwd": course, "env": nbgrader_env(more_bins)}


def run_nbgrader(
    course: Path, *args: str, more_bins: Sequence[str] = (), **options
) -> subprocess.CompletedProcess:
    """`nbgrader ARGS` in `course`, waited for; `options` are subprocess.run's (the output, the
    timeout, stdin, ...). The command run is the result's `args`."""
    return subprocess.run(**nbgrader_call(course, *args, more_bins=more_bins), **options)
