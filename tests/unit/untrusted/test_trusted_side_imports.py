"""The trust boundary from the other side: the trusted side (everything of the kit outside
grader/untrusted/, grader/exercise/ and grader/incell.py, and nbgrader_config.py) imports
nothing of grader/untrusted/ but its protocol (grader/untrusted/protocol.py: what both sides
share, standard library only). The reverse test, that the untrusted side imports nothing
trusted, is test_trust_boundary.py, whose import checker this uses."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from test_trust_boundary import GRADER, _module_name, kit_imports

UNTRUSTED = "grader.untrusted"
PROTOCOL = "grader.untrusted.protocol"
UNTRUSTED_SIDE = ("untrusted", "exercise", "incell.py")


def trusted_modules() -> list[Path]:
    out = []
    for path in sorted(GRADER.rglob("*.py")):
        if path.relative_to(GRADER).parts[0] not in UNTRUSTED_SIDE:
            out.append(path)
    return out + [GRADER.parent / "nbgrader_config.py"]


def imported_by_name(source: str) -> set[str]:
    """Modules imported by a constant name: importlib.import_module("grader.x"), __import__."""
    out = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if name in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                out.add(node.args[0].value)
    return out


def reaches(source: str, module: str, is_package: bool = False) -> set[str]:
    """What `source` (the module `module`) imports of grader/untrusted/ other than the protocol."""
    found = kit_imports(source, module, is_package) | imported_by_name(source)
    return {
        m
        for m in found
        if (m == UNTRUSTED or m.startswith(UNTRUSTED + "."))
        and not (m == PROTOCOL or m.startswith(PROTOCOL + "."))
    }


def untrusted_reaches(path: Path) -> set[str]:
    if path.parent == GRADER.parent:  # nbgrader_config.py: not in the package
        return reaches(path.read_text(), path.stem)
    return reaches(path.read_text(), _module_name(path), path.name == "__init__.py")


# ------------------------------------------------------------ the checker itself
def test_checker_sees_relative_absolute_and_by_name_imports():
    src = (
        "from ..untrusted.autograd_guard import BLOCK\n"
        "from ..untrusted import protocol, runner\n"
        "import grader.untrusted.server\n"
        "def f():\n    importlib.import_module('grader.untrusted.zygote')\n"
    )
    assert reaches(src, "grader.replay.x") == {
        "grader.untrusted.autograd_guard.BLOCK",
        "grader.untrusted.runner",
        "grader.untrusted.server",
        "grader.untrusted.zygote",
    }


def test_checker_allows_the_protocol_only():
    src = (
        "from ..untrusted import protocol\n"
        "from ..untrusted.protocol import BLOCK\n"
        "import grader.untrusted.protocol\n"
        "from .. import untrusted\n"
    )
    assert reaches(src, "grader.replay.x") == {"grader.untrusted"}
    assert reaches("from .untrusted import protocol\n", "grader", is_package=True) == set()


# ------------------------------------------------------------ the kit
def test_there_are_trusted_modules():
    names = {p.relative_to(GRADER.parent).as_posix() for p in trusted_modules()}
    assert {
        "grader/replay/run.py",
        "grader/verdicts/judge.py",
        "grader/confine/warm.py",
        "nbgrader_config.py",
    } <= names
    assert not any(n.startswith(("grader/untrusted/", "grader/exercise/")) for n in names)


@pytest.mark.parametrize("path", trusted_modules(), ids=lambda p: str(p.relative_to(GRADER.parent)))
def test_trusted_side_imports_only_the_protocol_of_the_untrusted_side(path):
    assert untrusted_reaches(path) == set()
