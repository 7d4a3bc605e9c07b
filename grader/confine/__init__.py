"""The sandbox, built from outside it: bubblewrap and resource limits (bwrap.py), a uid of
its own per sandbox (users.py), and the autograde kernel's launcher (kernel.py, with the
kernel spec in jupyter/). Nothing here runs a student's code in this process."""

from .bwrap import PACKAGE, VISIBLE_INSIDE, Limits, Sandbox, bwrap_works, default_sandbox
from .kernel import make_kernel_dir, prepare_runtime_dir
from .probe import WARNING

__all__ = [
    "PACKAGE",
    "VISIBLE_INSIDE",
    "WARNING",
    "Limits",
    "Sandbox",
    "bwrap_works",
    "default_sandbox",
    "make_kernel_dir",
    "prepare_runtime_dir",
]
