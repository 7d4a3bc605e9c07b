"""confine/kernel.py's runtime folders: one per grading process, named with its pid; what a
process killed by a signal left behind, the next one removes, and nothing else."""

from __future__ import annotations

import os
from pathlib import Path

from grader.confine import kernel
from grader.confine.kernel import RUNTIME_PREFIX, sweep_runtime_dirs


def _gone_pid() -> int:
    """A pid no process has now."""
    pid = int(Path("/proc/sys/kernel/pid_max").read_text()) - 1
    while Path(f"/proc/{pid}").exists():
        pid -= 1
    return pid


def test_only_the_folders_of_processes_that_are_gone_are_removed(tmp_path):
    dead = tmp_path / f"{RUNTIME_PREFIX}{_gone_pid()}-abc"
    (dead / "bn-kernel-x" / "ipc").mkdir(parents=True)
    mine = tmp_path / f"{RUNTIME_PREFIX}{os.getpid()}-def"
    mine.mkdir()
    unnamed = tmp_path / f"{RUNTIME_PREFIX}old_style"  # no pid in its name: whose, unknown
    unnamed.mkdir()
    target = tmp_path / "not-ours"
    target.mkdir()
    link = tmp_path / f"{RUNTIME_PREFIX}{_gone_pid()}-link"
    link.symlink_to(target)
    assert sweep_runtime_dirs(tmp_path) == [dead]
    assert not dead.exists()
    assert mine.is_dir() and unnamed.is_dir() and link.is_symlink() and target.is_dir()


def test_a_running_process_of_another_user_keeps_its_folder(tmp_path):
    kept = tmp_path / f"{RUNTIME_PREFIX}1-xyz"  # pid 1 runs, whoever owns it
    kept.mkdir()
    assert sweep_runtime_dirs(tmp_path) == [] and kept.is_dir()


def test_a_process_that_loads_the_configuration_again_keeps_its_one_folder(tmp_path, monkeypatch):
    """A resident nbgrader (grader/grading/resident.py) reads nbgrader_config.py at every command."""
    monkeypatch.setattr(kernel.tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(kernel, "_runtime_dir", None)
    monkeypatch.setattr(kernel.atexit, "register", lambda *a, **k: None)
    first = kernel.prepare_runtime_dir()
    assert kernel.prepare_runtime_dir() == first and len(list(tmp_path.iterdir())) == 1
