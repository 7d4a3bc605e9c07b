"""The kit's one public import: the notebook's hidden tests run `from grader.incell import grade`
(grader/untrusted/in_kernel.py). Visible inside the sandbox. Everything else of the kit is
imported by its own module's path, and run through `backprop-ninja VERB` (grader/cli.py)."""

from .untrusted.in_kernel import grade

__all__ = ["grade"]
