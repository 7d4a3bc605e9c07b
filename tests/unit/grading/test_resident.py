"""grader/grading/resident.py with a real nbgrader: one process runs command after command, and
a process that dies costs its command only."""

from __future__ import annotations

import pytest

from grader.grading.resident import Resident

pytestmark = pytest.mark.integration  # starts a Python that imports nbgrader


@pytest.fixture
def resident(tmp_path):
    r = Resident(tmp_path, tmp_path / "logs" / "nbgrader.log")
    yield r
    r.close()


def test_commands_run_one_after_another_in_one_process(resident):
    rc, said = resident.run("--version")
    pid = resident.proc.pid
    assert rc == 0 and "nbgrader version" in said
    rc, said = resident.run("autograde", "nothing")
    assert rc == 1 and "No notebooks were matched" in said and "nbgrader version" not in said
    assert resident.run("--version")[0] == 0 and resident.proc.pid == pid


def test_a_process_that_dies_mid_command_costs_that_command_only(resident, tmp_path):
    resident.run("--version")
    (tmp_path / "nbgrader_config.py").write_text("import os\nos._exit(3)\n")
    rc, said = resident.run("autograde", "nothing")
    assert rc == -1 and "the resident nbgrader ended: status 3" in said
    (tmp_path / "nbgrader_config.py").unlink()
    rc, said = resident.run("autograde", "nothing")
    assert rc == 1 and "No notebooks were matched" in said


def test_closing_its_input_ends_it(resident):
    resident.run("--version")
    proc = resident.proc
    resident.close()
    assert proc.returncode == 0 and resident.proc is None
