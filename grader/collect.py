"""Stable entry point: `python -m grader.collect COURSE ZIP` runs grader/course/collect.py (an LMS's
"download all submissions" zip into submitted/; kept for the Makefile, the README and TAs' scripts)."""

import sys

from .course.collect import *  # noqa: F403
from .course.collect import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
