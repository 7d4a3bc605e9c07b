"""The kit's one public import: the notebook's hidden tests run `from grader.incell import grade`
(grader/untrusted/in_kernel.py), and an exercise written from a definition `grade_gradient`
and `grade_training` (grader/authoring/). Visible inside the sandbox. Everything else of the kit is
imported by its own module's path, and run through `backprop-ninja VERB` (grader/cli.py)."""

from .untrusted.in_kernel import grade, grade_gradient, grade_training

__all__ = ["grade", "grade_gradient", "grade_training"]
