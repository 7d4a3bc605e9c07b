"""The kit's entry points: the one command line (`backprop-ninja VERB`, grader/cli.py, the same as
`python -m grader VERB`), the one public import (grader.incell), and the sandbox's kernel spec.
The top-level modules that re-exported a subfolder's module are gone, and nothing names them."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import grader
from grader import cli
from grader.confine import PACKAGE

ROOT = Path(__file__).resolve().parents[2]
TOP_LEVEL = {"__init__", "__main__", "cli", "incell", "settings", "quote"}  # quote: every folder uses it
# the modules once at grader/'s top level (each re-exported one in a subfolder), and an old class name
GONE = ["batch", "collect", "data", "report", "samples", "suspicious"]
GONE += ["execute", "intake", "neutralise", "preprocessor", "rebuild", "exports"]
NAMES_GONE = re.compile(rb"\bgrader[./](?:%s)\b|\bSandboxed%s\b" % ("|".join(GONE).encode(), b"Execute"))
# an option (or argument) each verb's own usage shows
OWN_OPTION = {
    "grade": "--workers",
    "report": "--canvas-assignment-id",
    "suspicious": "course",
    "collect": "--keep-existing",
    "gradescope": "{build,prepare,run}",
    "data": "--source",
    "samples": "course",
    "init": "--course-id",
    "new": "--name",
    "check": "--names-txt",
}


def _run(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=120)


def _console_script() -> str:
    here = Path(sys.executable).parent / "backprop-ninja"  # the virtualenv's, when tests run from it
    found = str(here) if here.is_file() else shutil.which("backprop-ninja")
    assert found, "no backprop-ninja console script: pip install -e . (make venv) installs it"
    return found


@pytest.mark.integration
def test_the_console_script_lists_every_verb_and_python_m_is_the_same(tmp_path):
    script = _run(_console_script(), "--help", cwd=tmp_path)
    assert script.returncode == 0 and script.stdout.startswith("usage: backprop-ninja")
    verbs = script.stdout.split("verbs:\n")[1].split("\n\n")[0]
    listed = re.findall(r"^  (\S+) +\S", verbs, re.M)
    assert listed == list(cli.VERBS) == list(OWN_OPTION)
    python_m = _run(sys.executable, "-m", "grader", "--help", cwd=tmp_path)
    assert (python_m.returncode, python_m.stdout) == (0, script.stdout)
    unknown = _run(sys.executable, "-m", "grader", "nonsense", cwd=tmp_path)
    assert unknown.returncode == 2 and unknown.stderr.startswith("usage: backprop-ninja")


@pytest.mark.integration
def test_importing_the_cli_imports_no_verb(tmp_path):
    code = "import sys, grader.cli; print(sorted(m for m in sys.modules if m.startswith('grader')))"
    loaded = "['grader', 'grader.cli', 'grader.grading', 'grader.grading.nbgrader_main']"  # stdlib only
    assert _run(sys.executable, "-c", code, cwd=tmp_path).stdout.strip() == loaded


@pytest.mark.parametrize("verb", list(cli.VERBS))
def test_each_verb_prints_its_own_usage(verb, capsys):
    with pytest.raises(SystemExit) as done:
        cli.main([verb, "--help"])
    out = capsys.readouterr().out
    assert done.value.code == 0
    assert out.startswith(f"usage: backprop-ninja {verb} ") and OWN_OPTION[verb] in out


@pytest.mark.parametrize("argv", [[], ["nonsense"], ["--workers", "2"]])
def test_no_verb_or_an_unknown_one_exits_2_with_the_usage(argv, capsys):
    with pytest.raises(SystemExit) as done:
        cli.main(argv)
    assert done.value.code == 2 and capsys.readouterr().err.startswith("usage: backprop-ninja [-h] VERB")


@pytest.mark.integration
def test_a_verb_runs_its_module(tmp_path, capsys):
    assert cli.main(["suspicious", str(tmp_path)]) == 0
    assert "no suspicious submissions" in capsys.readouterr().out
    assert (tmp_path / "reports" / "suspicious.json").read_text() == "[]"
    assert cli.main(["check"]) == 0 and capsys.readouterr().out.startswith("bubblewrap sandbox: ")


def test_the_top_level_holds_only_the_cli_incell_settings_and_quote():
    assert {p.stem for p in Path(grader.__file__).parent.glob("*.py")} == TOP_LEVEL


@pytest.mark.integration
def test_no_file_names_a_deleted_module():
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
    )
    if listed.returncode != 0:
        pytest.skip("not a git checkout")
    files = [ROOT / name for name in listed.stdout.decode().split("\0") if name]
    naming = {
        f"{path.relative_to(ROOT)}: {m.group().decode()}"
        for path in files
        if path.is_file()
        for m in NAMES_GONE.finditer(path.read_bytes())
    }
    assert naming == set()


def test_hidden_tests_import():
    from grader.incell import grade
    from grader.untrusted.in_kernel import grade as real

    assert grade is real


def test_kernel_spec_runs_the_sandbox_package():
    spec = json.loads(
        (PACKAGE / "confine" / "jupyter" / "kernels" / "backprop-ninja-sandbox" / "kernel.json").read_text()
    )
    assert spec["argv"][:5] == ["python", "-I", "-m", "grader.confine", "kernel"]
    assert (Path(grader.__file__).parent / "confine" / "__main__.py").is_file()


def test_config_points_nbgrader_at_the_kernel_spec():
    text = (ROOT / "nbgrader_config.py").read_text()
    assert 'os.path.join(os.path.dirname(confine.__file__), "jupyter")' in text
    assert (Path(grader.confine.__file__).parent / "jupyter").is_dir()


CONFIG_LOAD = """import json, sys
from traitlets.config import Config
from grader.grading.nbgrader_main import skip_iri_checker
skip_iri_checker()
c = Config()
exec(open(sys.argv[1]).read(), {"get_config": lambda: c, "__file__": sys.argv[1]})
named = [p for k in ("sanitize_preprocessors", "autograde_preprocessors") for p in c.Autograde[k]]
named += list(c.GenerateFeedback.preprocessors) + [c.GenerateFeedback.exporter_class]
named = [p for p in named if isinstance(p, str)]
once = c.Exporter.get("optimistic_validation")
print(json.dumps({"torch": "torch" in sys.modules, "named": named, "once": once}))
"""


@pytest.mark.integration
def test_loading_the_config_imports_no_torch_and_each_named_class_exists(tmp_path):
    """An nbgrader command that grades nothing (export, generate_feedback) pays no torch import."""
    out = _run(sys.executable, "-c", CONFIG_LOAD, str(ROOT / "nbgrader_config.py"), cwd=tmp_path)
    loaded = json.loads(out.stdout)
    assert loaded["torch"] is False, out.stderr
    from nbconvert.exporters import Exporter
    from nbconvert.preprocessors import Preprocessor
    from traitlets.utils.importstring import import_item

    kit = {"RebuildFromSource", "CheckCellMetadata", "LimitedExecute", "NeutraliseOutputs", "ReplayGrades"}
    kit |= {"OverwriteCellsOnce", "SaveAutoGradesOnce"}
    kit |= {"FeedbackSummary", "FeedbackExporter"}
    assert {n.rpartition(".")[2] for n in loaded["named"]} == kit
    for name in loaded["named"]:
        assert issubclass(import_item(name), (Preprocessor, Exporter)), name
    # the notebook validated once, after the last preprocessor, by a trait this nbconvert has
    assert loaded["once"] is True and "optimistic_validation" in Exporter.class_trait_names()
