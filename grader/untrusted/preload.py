"""Once, in the warm replay server, before any run forks: what a blocked run cannot import
for itself (it can load no extension module of its own: autograd_guard.py), imported ahead; and
what every run would set up for itself on its first use, set up once (warm_serialization)."""

from __future__ import annotations

import importlib
import io
import os
import sys

import torch

from .autograd_guard import ENTRY_POINTS

# extension modules a blocked run may not have: they reach memory and interpreter internals
NOT_PRELOADED = (
    "_test",
    "_xx",
    "xx",
    "_ctypes",
    "_tkinter",
    "_curses",
    "readline",
    "ossaudiodev",
    "nis",
    "spwd",
)


def preload() -> None:
    """Once, in the warm server: the modules whose entry points a blocked run replaces, and
    every extension module of the standard library an answer may import (a blocked run can
    load none of its own)."""
    for module_name in ENTRY_POINTS:
        importlib.import_module(module_name)
    folder = os.path.join(os.path.dirname(os.__file__), "lib-dynload")
    names = [f.partition(".")[0] for f in (os.listdir(folder) if os.path.isdir(folder) else [])]
    names += list(sys.builtin_module_names)
    for name in sorted(set(names)):
        if not name.startswith(NOT_PRELOADED):
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - not built here: nobody can import it then either
                pass


def warm_serialization() -> None:
    """Once, in the warm server: a tensor saved and loaded as a run loads its inputs and saves its
    results. torch sets up its (weights-only) pickling on first use; made in each forked run, that
    was about 1,100 page faults and 12 ms of CPU a run, for an inject file of a few kB."""
    blob = io.BytesIO()
    torch.save({"warm": torch.zeros(2, 2)}, blob)
    blob.seek(0)
    torch.load(blob, weights_only=True)
