"""ARCHITECTURE.md is the map of the package: every module of grader/ is named in it (in its
folder's row, or the top level's paragraph), so a new module cannot land unmapped, and no module
it names is gone."""

from __future__ import annotations

import re

from conftest import ROOT

PAGE = (ROOT / "ARCHITECTURE.md").read_text()
PACKAGE = ROOT / "grader"


def _rows() -> dict[str, str]:
    """Folder (e.g. 'verdicts') -> the text of its row in the table."""
    return {m[1]: m[0] for m in re.finditer(r"^\| `grader/(\w+)/` \|.*$", PAGE, flags=re.M)}


def test_every_folder_has_a_row_and_every_row_a_folder():
    folders = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert set(_rows()) == folders


def test_every_module_is_named_in_its_folders_row():
    rows = _rows()
    unnamed = [
        f"{p.parent.name}/{p.name}"
        for p in sorted(PACKAGE.glob("*/*.py"))
        if p.name != "__init__.py"
        and f"`{p.name}`" not in rows.get(p.parent.name, "")
        and not re.search(rf"[`/]{re.escape(p.name)}`", rows.get(p.parent.name, ""))
    ]
    assert unnamed == []


def test_every_top_level_module_is_named():
    top = [p.name for p in PACKAGE.glob("*.py") if p.name != "__init__.py"]
    assert [n for n in top if f"`{n}`" not in PAGE] == []


def test_every_file_named_exists():
    named = set(re.findall(r"`((?:grader/)?\w+/\w+\.py)`", PAGE))
    missing = [n for n in named if not (ROOT / n).exists() and not (PACKAGE / n).exists()]
    assert missing == []
