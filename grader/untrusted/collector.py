"""The cyclic garbage collector while a warm server starts: off, from this module's import (the
server's first) until `started()`. Start-up makes about a million objects and almost no garbage
(torch, ipykernel, matplotlib, the dataset), and each full collection walks every one of them:
three in `import torch` alone, about 0.2 of a server's 1.6 CPU-s. `started()` freezes what
start-up made, out of every later collection (no collector's pause in a forked run or kernel, no
copy-on-write of the pages a collection would touch), and turns the collector back on for what
the forks make: a student's cycles are still collected."""

from __future__ import annotations

import gc

gc.disable()


def started() -> None:
    gc.freeze()
    gc.enable()
