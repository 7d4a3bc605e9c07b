"""The gradebook on PostgreSQL: a throw-away server started here (initdb and pg_ctl in a temp
folder, listening on a unix socket only, no system service), a course whose nbgrader_config.py
points c.CourseDirectory.db_url at it, and the demo class graded by two parallel workers."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from grader.exercise import spec
from grader.incoming.submissions import write_submissions
from grader.reference.backprop_ninja.samples import DEMO
from grader.reports.scores import read_scores

from conftest import make_course, nbgrader
from corpus import EXPECTED_ZEROS


def _tool(name: str) -> str | None:
    return shutil.which(name) or next(iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))), None)


@pytest.fixture(scope="module")
def postgres_url():
    initdb, pg_ctl = _tool("initdb"), _tool("pg_ctl")
    if not initdb or not pg_ctl:
        pytest.skip("PostgreSQL is not installed (Debian: apt-get install postgresql)")
    folder = Path(tempfile.mkdtemp(prefix="pg-", dir="/tmp"))  # short: a socket path has a length limit
    as_owner: list[str] = []
    if os.geteuid() == 0:  # initdb refuses to run as root: the server runs as the postgres user
        shutil.chown(folder, "postgres", "postgres")
        as_owner = ["runuser", "-u", "postgres", "--"]
    folder.chmod(0o755)
    run = lambda *a: subprocess.run([*as_owner, *a], check=True, capture_output=True, timeout=120)  # noqa: E731
    run(initdb, "-D", str(folder / "data"), "--auth=trust", "-U", "postgres")
    options = f"-k {folder} -c listen_addresses=''"
    run(pg_ctl, "-D", str(folder / "data"), "-o", options, "-l", str(folder / "server.log"), "-w", "start")
    try:
        run(_tool("createdb") or "createdb", "-h", str(folder), "-U", "postgres", "gradebook")
        yield f"postgresql+psycopg://postgres@/gradebook?host={folder}"
    finally:
        subprocess.run(
            [*as_owner, pg_ctl, "-D", str(folder / "data"), "-m", "immediate", "stop"],
            capture_output=True,
            timeout=120,
        )
        shutil.rmtree(folder, ignore_errors=True)


def test_a_class_graded_into_postgresql(tmp_path, names_txt, postgres_url):
    course = make_course(tmp_path / "course", names_txt)
    with open(course / "nbgrader_config.py", "a") as config:
        config.write(f"\nc.CourseDirectory.db_url = {postgres_url!r}\n")
    nbgrader(course, "generate_assignment", "backprop_ninja", "--force")
    write_submissions(DEMO, course=course)
    done = subprocess.run(
        [sys.executable, "-m", "grader", "grade", str(course), "--workers", "2", "--quiet"],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    log = (course / "reports" / "autograde.log").read_text()
    assert done.returncode == 0, done.stdout[-2000:] + log[-3000:]
    assert not (course / "gradebook.db").exists()  # nothing went to SQLite
    scores = {s.student: s.by_grade_id for s in read_scores(postgres_url)}
    for student, zeros in EXPECTED_ZEROS.items():
        expected = {g.grade_id: 0.0 if g.grade_id in zeros else g.points for g in spec.GRADED}
        assert scores[student] == expected, student
    table = subprocess.run(
        [sys.executable, "-m", "grader", "report", str(course)], capture_output=True, text=True
    )
    assert "alice         26       2       2       8         38" in table.stdout, table.stdout + table.stderr
