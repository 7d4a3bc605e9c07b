"""The release notebook for a student on their own (issue 20), in-process: it needs only torch,
Jupyter and matplotlib; its data cell fetches the same file, with the same checksum, as the
kit's own download code (grader/exercise/data.py: one source of truth, checked here); training
uses one thread and starts with a short run beside the lecture's, the grader's cap unchanged."""

from __future__ import annotations

import ast
import re
import sys

import nbformat

from grader.exercise import data, spec
from grader.exercise.cells import strip_magics

from conftest import ROOT

RELEASE = ROOT / "release" / spec.ASSIGNMENT / f"{spec.NOTEBOOK}.ipynb"
ALLOWED = {"torch", "matplotlib"}  # and the standard library


def _cells() -> dict:
    return {c.metadata.nbgrader.grade_id: c for c in nbformat.read(RELEASE, 4).cells}


def test_the_release_imports_only_torch_matplotlib_and_the_standard_library():
    imported = set()
    for c in _cells().values():
        if c.cell_type != "code":
            continue
        for node in ast.walk(ast.parse(strip_magics(c.source))):
            if isinstance(node, ast.Import):
                imported |= {a.name.partition(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                imported.add(node.module.partition(".")[0])
    assert "torch" in imported and "matplotlib" in imported
    assert imported - ALLOWED - set(sys.stdlib_module_names) == set()


def test_the_data_cell_fetches_the_kits_file_with_its_checksum():
    source = _cells()["data_read"].source
    assert f"'{data.NAMES_URL}'" in source and f"'{data.NAMES_SHA256}'" in source
    assert "NAMES_TXT_URL" in source  # where a test (or a mirror) serves it instead
    assert f"{data.NAMES_URL}" in _cells()["data_md"].source  # what to download, said offline too


def test_training_uses_one_thread_and_starts_short():
    source = _cells()["ex4_train"].source
    assert "torch.set_num_threads(1)" in source
    assert re.search(r"^full_run = False\b", source, re.M)
    assert "max_steps = 200000 if full_run else 20000" in source
    assert re.search(r"NBGRADER_EXECUTION'\):\n  max_steps = 20 ", source)  # the grader's cap
