"""The trust boundary: what runs with the student's code (grader/untrusted/) and the public
definition of the exercise it uses (grader/exercise/) import nothing else of the kit, and
the files the sandbox shows (grader.confine.VISIBLE_INSIDE) are enough to run it. The other
direction (the trusted side imports only grader/untrusted/protocol.py): test_trusted_side_imports.py."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.confine import VISIBLE_INSIDE

GRADER = Path(__file__).resolve().parents[3] / "grader"
INSIDE = ("grader.untrusted", "grader.exercise")


def _module_name(path: Path, root: Path = GRADER) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def kit_imports(source: str, module: str, is_package: bool) -> set[str]:
    """Every module of the kit (`grader` or below) that `source` imports, relative ones resolved."""
    package = module if is_package else module.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                base = ".".join(base + ([node.module] if node.module else []))
            else:
                base = node.module
            # `from X import y`: y may be a submodule of X; counting it as X.y is the strict reading
            out |= {f"{base}.{a.name}" if a.name != "*" else base for a in node.names}
    return {m for m in out if m == "grader" or m.startswith("grader.")}


def _inside(name: str, allowed=INSIDE) -> bool:
    return any(name == a or name.startswith(a + ".") for a in allowed)


def _modules(*folders: str) -> list[Path]:
    return sorted(p for f in folders for p in (GRADER / f).rglob("*.py"))


def _imports_of(path: Path) -> set[str]:
    return kit_imports(path.read_text(), _module_name(path), path.name == "__init__.py")


# ------------------------------------------------------------ the checker itself
def test_checker_resolves_relative_imports():
    src = "from ..reference import steps\nfrom . import protocol\nimport grader.replay.results\n"
    assert kit_imports(src, "grader.untrusted.runner", False) == {
        "grader.reference.steps",
        "grader.untrusted.protocol",
        "grader.replay.results",
    }


def test_checker_resolves_relative_imports_in_a_package_init():
    found = kit_imports("from .in_kernel import grade\n", "grader.untrusted", True)
    assert found == {"grader.untrusted.in_kernel.grade"}


def test_checker_sees_imports_inside_functions():
    src = "def f():\n    from ..verdicts import judge\n"
    assert not _inside(next(iter(kit_imports(src, "grader.exercise.spec", False))))


# ------------------------------------------------------------ the kit
def test_there_are_modules_on_the_untrusted_side():
    names = {_module_name(p) for p in _modules("untrusted", "exercise")}
    assert {"grader.untrusted.runner", "grader.untrusted.server", "grader.exercise.spec"} <= names


@pytest.mark.parametrize("path", _modules("untrusted", "exercise"), ids=lambda p: str(p.relative_to(GRADER)))
def test_untrusted_side_imports_only_untrusted_and_exercise(path):
    assert {m for m in _imports_of(path) if not _inside(m)} == set()


def test_incell_imports_only_untrusted():
    assert {m for m in _imports_of(GRADER / "incell.py") if not _inside(m, ("grader.untrusted",))} == set()


def test_incell_imports_something_of_untrusted():
    assert _imports_of(GRADER / "incell.py") != set()


def test_package_init_imports_nothing_of_the_kit():
    """grader/__init__.py is visible inside too and runs before any of it."""
    assert _imports_of(GRADER / "__init__.py") == set()


def test_visible_inside_is_the_untrusted_side_and_its_entry_points():
    assert set(VISIBLE_INSIDE) == {"__init__.py", "incell.py", "exercise", "untrusted"}


# ------------------------------------------------------------ run from the visible files alone
# The venv holds an editable install whose finder maps `grader.<child>` to the working tree
# even when another `grader` comes first on sys.path. In the sandbox that tree shows only
# VISIBLE_INSIDE, so the finder finds nothing more; here it is taken out to get the same view.
_ONLY_COPY = (
    "import sys; sys.meta_path[:] = [f for f in sys.meta_path "
    "if getattr(f, '__name__', '') != '_EditableFinder']; sys.path.insert(0, {tmp!r}); "
)


@pytest.fixture(scope="module")
def visible_copy(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("visible")
    (tmp / "grader").mkdir()
    for name in VISIBLE_INSIDE:
        src = GRADER / name
        if src.is_dir():
            shutil.copytree(src, tmp / "grader" / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(src, tmp / "grader" / name)
    return tmp


def _python(tmp: Path, code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-I", "-c", _ONLY_COPY.format(tmp=str(tmp)) + code],
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.integration
def test_visible_files_are_enough_for_the_untrusted_side(visible_copy):
    proc = _python(
        visible_copy,
        "import grader, grader.incell, grader.untrusted.server, grader.untrusted.runner; "
        "assert grader.__file__.startswith(sys.path[0]), grader.__file__; print('ok')",
    )
    assert (proc.returncode, proc.stdout.strip()) == (0, "ok"), proc.stderr


@pytest.mark.integration
def test_the_reference_answers_are_not_visible(visible_copy):
    proc = _python(visible_copy, "import grader.reference.steps")
    assert proc.returncode != 0 and "No module named 'grader.reference'" in proc.stderr, proc.stderr


def test_the_answer_key_cheat_would_work_where_the_key_is_importable(lecture_batch):
    """The corpus's c06_answer_key gets nothing in the sandbox only because the key is out of
    reach: run here, where the whole kit is importable, it produces every gradient right."""
    import torch

    from grader.reference.backprop_ninja import rules
    from grader.replay.plan import EX1

    from corpus import ANSWER_KEY

    params, Xb, Yb = lecture_batch
    values, expected = rules.autograd_grads(params, Xb, Yb)
    ns = {"torch": torch, **values}
    exec(ANSWER_KEY, ns)
    for name in [g.name for g in EX1]:
        assert torch.allclose(ns[name], expected[name[1:]], atol=1e-6), name
