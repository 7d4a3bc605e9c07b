"""The stable entry points keep working after the package was grouped by job: the names older
nbgrader_config.py files import, the `python -m grader.*` commands, and the kernel spec."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from traitlets.config import Config

import grader
from grader import preprocessors
from grader.course import intake
from grader.sandbox import PACKAGE

ROOT = Path(__file__).resolve().parents[2]


def test_old_config_imports_are_the_new_classes():
    from grader.intake import ACTIVE_FILE_PATTERNS, before_autograde
    from grader.neutralise import NeutraliseOutputs
    from grader.preprocessor import ReplayGrades
    from grader.rebuild import RebuildFromSource

    assert (ReplayGrades, NeutraliseOutputs, RebuildFromSource) == (
        preprocessors.ReplayGrades,
        preprocessors.NeutraliseOutputs,
        preprocessors.RebuildFromSource,
    )
    assert before_autograde is intake.before_autograde and ACTIVE_FILE_PATTERNS is intake.ACTIVE_FILE_PATTERNS


def test_old_execute_name_takes_its_old_settings():
    from grader.execute import SandboxedExecute

    config = Config()
    config.SandboxedExecute.submission_timeout = 77
    step = SandboxedExecute(config=config)
    assert isinstance(step, preprocessors.LimitedExecute) and step.submission_timeout == 77


def test_hidden_tests_import():
    from grader.incell import grade
    from grader.sandboxed.in_kernel import grade as real

    assert grade is real


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_python_m_commands(tmp_path):
    assert _run("grader.batch", "--help", cwd=tmp_path).stdout.startswith("usage:")
    done = _run("grader.suspicious", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 0 and "no suspicious submissions" in done.stdout
    assert (tmp_path / "reports" / "suspicious.json").read_text() == "[]"
    check = _run("grader.sandbox", "check", cwd=tmp_path)
    assert check.returncode == 0 and "bubblewrap" in check.stdout
    assert _run("grader.sandbox", "nonsense", cwd=tmp_path).returncode == 2


def test_kernel_spec_runs_the_sandbox_package():
    spec = json.loads(
        (PACKAGE / "sandbox" / "jupyter" / "kernels" / "backprop-ninja-sandbox" / "kernel.json").read_text()
    )
    assert spec["argv"][:5] == ["python", "-I", "-m", "grader.sandbox", "kernel"]
    assert (Path(grader.__file__).parent / "sandbox" / "__main__.py").is_file()


def test_config_points_nbgrader_at_the_kernel_spec():
    text = (ROOT / "nbgrader_config.py").read_text()
    assert 'os.path.join(os.path.dirname(sandbox.__file__), "jupyter")' in text
    assert (Path(grader.sandbox.__file__).parent / "jupyter").is_dir()
