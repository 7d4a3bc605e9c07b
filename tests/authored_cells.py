"""A written exercise's notebook run in-process: its code cells in order, in one namespace, as a
kernel runs them, with each grade cell's score (what its last call returns, as nbgrader reads it)."""

from __future__ import annotations

import contextlib
import io


def run_cells(nb, answer: str | dict | None = None) -> tuple[dict, str]:
    """The notebook's code cells in order, in one namespace, as a kernel runs them; `answer`:
    every answer cell's code, or some of them by grade id."""
    ns, out = {}, io.StringIO()
    with contextlib.redirect_stdout(out):
        for m, c in zip([c.metadata["nbgrader"] for c in nb.cells], nb.cells):
            if c.cell_type == "code":
                if isinstance(answer, dict):
                    code = answer.get(m["grade_id"], c.source)
                else:
                    code = answer if (answer is not None and m["solution"]) else c.source
                exec(compile(code, m["grade_id"], "exec"), ns)
                if m["grade"]:
                    ns.setdefault("_scores", {})[m["grade_id"]] = eval(code.splitlines()[-2], ns)
    return ns["_scores"], out.getvalue()
