"""The kit as student code sees it, wherever the replay runs: grader/untrusted/, the exercise's
public definition and the hidden tests' entry point (protocol.KIT_INSIDE), never the judge or
the reference answers. Inside the sandbox the rest of the kit is not there at all; in a plain
child process (a student's own `backprop-ninja check`, the tests' plain launcher) this finder
refuses to import it, so an answer that would import the answer key fails there as it fails
in the grader's sandbox (files read by path are the sandbox's matter alone)."""

from __future__ import annotations

import importlib.abc
import sys

from .protocol import KIT_INSIDE

_VISIBLE = {name.removesuffix(".py") for name in KIT_INSIDE}


class KitOutside(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        parts = name.split(".")
        if parts[0] == "grader" and len(parts) > 1 and parts[1] not in _VISIBLE:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None  # everything else: the other finders decide


def install() -> None:
    """First on the import path, and what of the rest of the kit is imported already forgotten."""
    if not any(isinstance(f, KitOutside) for f in sys.meta_path):
        sys.meta_path.insert(0, KitOutside())
    for name in [m for m in sys.modules if m.startswith("grader.")]:
        if name.split(".")[1] not in _VISIBLE:
            del sys.modules[name]
