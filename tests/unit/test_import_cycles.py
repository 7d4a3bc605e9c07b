"""No import cycle among grader's modules: imports go one way, so each module can be read (and
loaded) after the ones it names. Every import counts, wherever it is written: at the top, inside
a function, under `if TYPE_CHECKING:` (a cycle of types is still two modules that need each
other); relative ones are resolved, and `from . import x` names the module x."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import ROOT

PACKAGE = ROOT / "grader"
# Cycles known and not broken yet, by their modules' file names (whatever their folder is called):
# each closes through one import inside a function. Remove a line once its cycle is gone.
KNOWN: list[set[str]] = []  # none left: a cycle that must stay would be named here, with why


def _modules() -> dict[str, Path]:
    """Dotted name -> file, for every module of the package (a package is its __init__.py)."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _targets(node: ast.Import | ast.ImportFrom, name: str, is_package: bool, known) -> list[str]:
    """The modules of the package an import statement in module `name` loads."""
    if isinstance(node, ast.Import):
        wanted = [alias.name for alias in node.names]
    else:
        if node.level:
            base = name.split(".") if is_package else name.split(".")[:-1]
            base = base[: len(base) - (node.level - 1)]
            source = ".".join(base + ([node.module] if node.module else []))
        else:
            source = node.module or ""
        # `from P import x`: the module P.x when there is one, else P itself
        wanted = [f"{source}.{a.name}" if f"{source}.{a.name}" in known else source for a in node.names]
    out = []
    for target in wanted:
        while target and target not in known:  # `import grader.x.y` names grader.x.y, or its package
            target = target.rpartition(".")[0]
        if target:
            out.append(target)
    return out


def import_graph() -> dict[str, set[str]]:
    known = _modules()
    graph = {}
    for name, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        graph[name] = {
            t
            for node in ast.walk(tree)
            if isinstance(node, (ast.Import, ast.ImportFrom))
            for t in _targets(node, name, is_package, known)
            if t != name
        }
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_finder_sees_relative_function_level_and_type_checking_imports():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    known = {"grader", "grader.x", "grader.x.m", "grader.x.n", "grader.y"}
    code = (
        "from . import n\nfrom ..y import thing\nimport grader.x.m.attr\n"
        "def f():\n    from .n import g\nif TYPE_CHECKING:\n    from grader import x\n"
    )
    found = [
        t
        for node in ast.walk(ast.parse(code))
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for t in _targets(node, "grader.x.m", False, known)
    ]
    assert sorted(found) == ["grader.x", "grader.x.m", "grader.x.n", "grader.x.n", "grader.y"]


def test_no_import_cycle_among_the_packages_modules():
    found = cycles(import_graph())
    by_files = [{name.rpartition(".")[2] for name in cycle} for cycle in found]
    new = [cycle for cycle, files in zip(found, by_files) if files not in KNOWN]
    gone = [files for files in KNOWN if files not in by_files]
    assert (new, gone) == ([], []), "a new cycle, or a KNOWN one that is gone (delete its line)"
