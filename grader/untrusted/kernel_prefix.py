"""The notebook's student-independent first cells (the imports and the 228k-example dataset),
run once by the warm kernel server (zygote.py) instead of once per submission; with what else
every kernel would do for itself that the server can do once (`import_ahead`), and each
cell's text transformed and compiled once where ipykernel and IPython each did it (`once_per_cell`).

The server runs them with the instructor's names.txt and keeps what each printed and the
namespace they leave. In each kernel it forks, a cell whose source is exactly the next of
them, with nothing else run in between, is replaced by printing what it printed; after the
last one the kernel's namespace becomes what the cells left (functions re-homed in it, the
`random` and torch generators as the cells left them), so every later cell sees what a cold
kernel would. Cells with magics, or that end in a bare expression or wrote to stderr, really
run. If anything else runs in the middle, the cells skipped so far run for real first
(silently: their output was already shown), and skipping stops.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import io
import random
import sys
import types

import torch

from ..exercise.cells import strip_magics
from . import known_cells
from .protocol import PREFIX_MODULE as MODULE  # how the replaced cells reach this module in the kernel
from .protocol import PREFIX_TAKE_CALL as TAKE
from .protocol import TEST_CELLS_MIME

# What each kernel imported for itself after the fork: IPKernelApp.initialize (the debugger, pdb,
# the history's sqlite3: 0.3 of its 0.4 CPU-s), then the notebook's first cells (`%matplotlib
# inline`, the traceback of a cell that raises), then the hidden tests' `from grader.incell
# import grade` (the exercise's definition and spec: a tenth of a kernel's sampled time). Imported
# once in the server: 0.2 CPU-s a kernel, and the kit's one more.
KERNEL_IMPORTS = (
    "pdb",
    "sqlite3",
    "pydoc",
    "faulthandler",
    "code",
    "ipykernel.debugger",
    "IPython.extensions",
    "IPython.core.magics.execution",
    "IPython.core.magics.pylab",
    "IPython.core.pylabtools",
    "matplotlib_inline.backend_inline",
    "matplotlib.backends.backend_agg",
    "stack_data",
    "pygments.formatters.terminal256",
    "IPython.core.oinspect",
    "IPython.core.completerlib",
    "grader.incell",
)


def import_ahead() -> None:
    """In the server, before any kernel forks."""
    for name in KERNEL_IMPORTS:
        try:
            importlib.import_module(name)
        except ImportError:  # another version without it: the kernel does without, or imports it
            pass
    try:  # `%matplotlib inline` reads every installed package's entry points the first time
        from matplotlib.backends.registry import backend_registry

        backend_registry.list_all()
    except Exception:  # noqa: BLE001 - another matplotlib: each kernel reads them, as before
        pass


def once_per_cell(shell) -> None:
    """In a kernel: ipykernel transforms a cell's text and asks whether it must run as a
    coroutine (compiling it), to decide how to run it; then IPython does both again to run it.
    Tokenizing and compiling the whole cell twice was a tenth of a kernel's sampled time. Nothing
    runs in between, so the second answers are the first's. Keyed by the execution count, as
    Prefix._transform is: the same text in a later cell is a new cell."""
    transform, run_async, last = shell.transform_cell, shell.should_run_async, {}

    def remembered(key, compute):
        if key not in last:
            if len(last) > 4:
                last.clear()
            last[key] = compute()
        return last[key]

    def transform_cell(raw_cell: str) -> str:
        return remembered(("transform", shell.execution_count, raw_cell), lambda: transform(raw_cell))

    def should_run_async(raw_cell: str, *, transformed_cell=None, preprocessing_exc_tuple=None) -> bool:
        if preprocessing_exc_tuple is not None or transformed_cell is None:  # IPython's own answer
            return run_async(
                raw_cell, transformed_cell=transformed_cell, preprocessing_exc_tuple=preprocessing_exc_tuple
            )
        key = ("async", shell.execution_count, raw_cell, transformed_cell)
        return remembered(key, lambda: run_async(raw_cell, transformed_cell=transformed_cell))

    shell.transform_cell, shell.should_run_async = transform_cell, should_run_async


def _shows_a_value(source: str) -> bool:
    body = ast.parse(source).body
    last = body[-1] if body else None
    is_print = (
        isinstance(last, ast.Expr)
        and isinstance(last.value, ast.Call)
        and isinstance(last.value.func, ast.Name)
        and last.value.func.id == "print"
    )
    return isinstance(last, ast.Expr) and not is_print


class Prefix:
    """Run in the server (`run`), then used in each kernel (`install`)."""

    def __init__(self, sources: list[str]):
        self.sources, self.printed, self.skippable = sources, [], []
        self.ns: dict = {"__name__": "__main__"}
        self.random_state = self.torch_state = None

    def run(self) -> bool:
        """In the server, in the data folder. False (and nothing is skipped) if a cell fails
        or writes to stderr."""
        kept = 0
        for source in self.sources:
            python = strip_magics(source)
            skippable = python == source and not _shows_a_value(source)
            if any(self.skippable) and not skippable:
                break  # a cell that must really run after skipped ones: the block ends here
            out, err = io.StringIO(), io.StringIO()
            try:
                with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                    known_cells.run(python, self.ns, "<prefix>")  # the data split's loop vectorised
            except Exception:  # noqa: BLE001 - then every kernel runs every cell itself
                err.write("failed")
            if err.getvalue():
                self.sources = []
                return False
            self.printed.append(out.getvalue())
            self.skippable.append(skippable)
            kept += 1 if skippable else 0
        self.sources = self.sources[: len(self.skippable)] if kept else []
        self.random_state, self.torch_state = random.getstate(), torch.get_rng_state()
        return bool(self.sources)

    def install(self, shell) -> None:
        """In a kernel, once its shell exists and before it runs anything."""
        from IPython.core.inputtransformer2 import TransformerManager

        plain = TransformerManager()
        self._shell, self._next, self._done, self._decided = shell, 0, not self.sources, {}
        self._expected = [plain.transform_cell(s) for s in self.sources]
        sys.modules[MODULE] = self  # type: ignore[assignment]
        shell.input_transformers_post.append(self._transform)

    def _transform(self, lines: list[str]) -> list[str]:
        key = (self._shell.execution_count, "".join(lines))  # a cell not counted (take's) may share a count
        if key not in self._decided:  # IPython may transform a cell more than once
            self._decided[key] = self._decide(lines)
        return self._decided[key]

    def _decide(self, lines: list[str]) -> list[str]:
        if self._done or "".join(lines).startswith(TAKE):  # take() checks its own cells
            return lines
        i = self._next
        if i < len(self.sources) and "".join(lines) == self._expected[i]:
            self._next += 1
            self._done = self._next == len(self.sources)
            return [f"__import__({MODULE!r}).replay({i})\n"] if self.skippable[i] else lines
        self._rebuild()
        return lines

    def replay(self, i: int) -> None:
        sys.stdout.write(self.printed[i])
        if i == len(self.sources) - 1:
            self._adopt()

    def take(self, nonce: str, first: int, count: int) -> None:
        """The skippable cells from `first` to the last, sent by the grader as one cell that IPython
        does not count (grader/preprocessors/prefix_block.py): what each printed, as one display
        the grader splits as it splits a test block's; `In`, `_i<n>` and the execution count as
        running them one by one would have left them; the namespace of the last. Raises, having
        changed nothing, unless they are the kernel's next cells (the grader then sends each)."""
        from IPython.display import publish_display_data

        end = first + count
        if self._done or first != self._next or count < 1 or end != len(self.sources):
            raise RuntimeError("these are not the kernel's next first cells")
        if not all(self.skippable[first:end]):
            raise RuntimeError("these first cells must really run")
        shell, base = self._shell, self._shell.execution_count
        for i, source in enumerate(self.sources[first:end]):
            if shell.history_manager is not None:
                shell.history_manager.store_inputs(base + i, source, source)
        shell.execution_count = base + count
        self._next, self._done = end, True
        self._adopt()
        cells = [{"stdout": p, "stderr": "", "value": None, "error": None} for p in self.printed[first:end]]
        publish_display_data({TEST_CELLS_MIME: {"nonce": nonce, "cells": cells}})

    def _rebuild(self) -> None:
        """Something else runs mid-way: the cells skipped so far run for real, silently."""
        self._done = True
        user_ns = self._shell.user_ns
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            for source, skipped in zip(self.sources[: self._next], self.skippable):
                if skipped:
                    exec(compile(source, "<prefix>", "exec"), user_ns)

    def _adopt(self) -> None:
        user_ns = self._shell.user_ns
        for name, value in self.ns.items():
            if name.startswith("__"):
                continue
            if isinstance(value, types.FunctionType) and value.__globals__ is self.ns:
                value = _rehomed(value, user_ns)
            user_ns[name] = value
        random.setstate(self.random_state)
        torch.set_rng_state(self.torch_state)


def _rehomed(f: types.FunctionType, globals_: dict) -> types.FunctionType:
    """The same function, looking up its globals in the kernel's namespace."""
    g = types.FunctionType(f.__code__, globals_, f.__name__, f.__defaults__, f.__closure__)
    g.__kwdefaults__, g.__qualname__, g.__module__ = f.__kwdefaults__, f.__qualname__, f.__module__
    g.__doc__, g.__dict__ = f.__doc__, dict(f.__dict__)
    return g
