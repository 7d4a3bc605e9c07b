"""In the student's kernel: a block of consecutive hidden-test cells run in one round trip
(grader/preprocessors/test_blocks.py sends it). Each cell runs as IPython would run it, in the
notebook's namespace, one after the other; what each printed, the value of its last expression
and the exception it raised come back together, as one display of MIME, for the grader to give
each cell back its own outputs. A cell's failure is its own: the next one still runs. Nothing of
the student's runs between them: the block's exercise-4 cells share one call of manual_backward
(in_kernel.one_block).

Nothing here is trusted: the grader checks the shape of what comes back, and the grades come
from the replay whatever it says (these outputs only feed the kernel flag, verdicts/flags.py).
"""

from __future__ import annotations

import ast
import contextlib
import io
import traceback

from .in_kernel import one_block
from .protocol import TEST_CELLS_MIME as MIME


def run(nonce: str, sources: list[str], ns: dict) -> None:
    from IPython.display import publish_display_data

    with one_block():
        results = [_one(i, source, ns) for i, source in enumerate(sources)]
    publish_display_data({MIME: {"nonce": nonce, "cells": results}})


def _one(i: int, source: str, ns: dict) -> dict:
    out, err = io.StringIO(), io.StringIO()
    value, error = None, None
    name = f"<test cell {i}>"
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            tree = ast.parse(source, name)
            last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
            exec(compile(tree, name, "exec"), ns)
            if last is not None:
                value = eval(compile(ast.Expression(last.value), name, "eval"), ns)
    except KeyboardInterrupt:  # the grader's timeout: the whole block stops, as a cell would
        raise
    except BaseException as e:  # noqa: BLE001 - SystemExit too: IPython keeps a cell's exit its own
        error = {
            "ename": type(e).__name__,
            "evalue": str(e),
            "traceback": traceback.format_exception(e),
        }
    return {
        "stdout": out.getvalue(),
        "stderr": err.getvalue(),
        "value": None if value is None or error else repr(value),
        "error": error,
    }
