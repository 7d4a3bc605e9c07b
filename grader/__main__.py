"""`python -m grader VERB ...`: the same as `backprop-ninja VERB ...` (grader/cli.py)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
