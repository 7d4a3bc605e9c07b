"""The student's own check from inside Colab, where the notebook is no file on the machine:
`from grader.self_check.colab import check; check()` in a cell, after the data cell has put
names.txt in the current folder. Colab hands the open notebook over as JSON."""

from __future__ import annotations

from .check import SEED, check_notebook, find_names_txt, table


def open_notebook() -> dict:
    """The notebook open in this Colab session, as Colab's frontend holds it (saved or not)."""
    from google.colab import _message  # Colab's own module: there only

    return _message.blocking_request("get_ipynb", timeout_sec=60)["ipynb"]


def check(names_txt: str | None = None, seed: int = SEED) -> None:
    """Print the table the feedback will open with, for the notebook open in Colab."""
    nb = open_notebook()
    print(table(check_notebook(nb, names_txt=find_names_txt(nb, names_txt), seed=seed)))
