"""grader/grading/nbgrader_main.py, as the kit starts nbgrader: nbgrader's command line, in a
process where jsonschema's IRI checker is never imported and notebooks are still validated."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration  # starts Pythons

PROBE = """
import sys
from grader.grading.nbgrader_main import skip_iri_checker
skip_iri_checker()
import nbformat
nbformat.validate(nbformat.v4.new_notebook())
try:
    nbformat.validate(nbformat.from_dict({"cells": [{"cell_type": "code"}], "metadata": {},
                                         "nbformat": 4, "nbformat_minor": 5}))
    print("invalid notebook accepted")
except nbformat.ValidationError:
    print("invalid notebook refused")
print("iri checker loaded:", sys.modules.get("rfc3987_syntax") is not None)
"""


def test_notebooks_are_validated_without_the_iri_checker():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["invalid notebook refused", "iri checker loaded: False"]


def test_it_is_nbgraders_command_line():
    out = subprocess.run(
        [sys.executable, "-m", "grader.grading.nbgrader_main", "--version"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    import nbgrader

    assert out.returncode == 0 and nbgrader.__version__ in out.stdout + out.stderr, out
