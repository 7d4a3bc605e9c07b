"""The student's own check from inside Colab, where the notebook is no file on the machine:
`from grader.self_check.colab import check; check()` in a cell, after the data cell has put
names.txt in the current folder. Colab hands the open notebook over as JSON."""

from __future__ import annotations

from .check import SEED
from .check import check as check_table


def open_notebook() -> dict:
    """The notebook open in this Colab session, as Colab's frontend holds it (saved or not)."""
    from google.colab import _message  # Colab's own module: there only

    return _message.blocking_request("get_ipynb", timeout_sec=60)["ipynb"]


def check(names_txt: str | None = None, seed: int = SEED) -> None:
    """Print the table the feedback will open with, for the notebook open in Colab."""
    print(check_table(open_notebook(), names_txt, seed))
