"""The TA's one command for a class: `python -m grader.batch [--force]` from the course root.

1. Preflight every submission (grader/preflight.py), so a broken file costs only its student.
2. Resume: a submission whose grading was interrupted (its autograded folder has no
   notebook yet) is graded again; finished ones are kept unless --force.
3. `nbgrader autograde` itself (the grades are nbgrader's, with the kit's configuration).
4. A summary: who was graded, who was not and why (also reports/batch.json).
"""

from __future__ import annotations

import argparse
import html
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from ..exercise import spec
from ..settings import report_dir
from . import intake
from .preflight import check_submission
from .quote import for_log


def run(course: Path, *, force: bool = False, nbgrader_args: list[str] = ()) -> dict:
    submitted = course / "submitted"
    students = (
        sorted(
            p.name
            for p in submitted.iterdir()
            if (p / spec.ASSIGNMENT).is_dir() or (p / spec.ASSIGNMENT).is_symlink()
        )
        if submitted.is_dir()
        else []
    )
    release_nb = course / "release" / spec.ASSIGNMENT / f"{spec.NOTEBOOK}.ipynb"
    summary: dict = {"students": {}}
    for student in students:
        folder = submitted / student / spec.ASSIGNMENT
        notes = intake.replace_non_regular(folder, release_nb)  # before anything reads or copies it
        notes += check_submission(folder, spec.NOTEBOOK, release_nb).notes
        intake.save_notes(course, student, notes)
        summary["students"][student] = {"preflight": notes}
        done = course / "autograded" / student / spec.ASSIGNMENT
        if done.is_dir() and not (done / f"{spec.NOTEBOOK}.ipynb").exists():
            shutil.rmtree(done)  # interrupted half-way: grade it again
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    cmd = (
        [str(Path(sys.executable).parent / "nbgrader"), "autograde", spec.ASSIGNMENT]
        + (["--force"] if force else [])
        + list(nbgrader_args)
    )
    reports = report_dir(course)
    reports.mkdir(parents=True, exist_ok=True)
    with open(reports / "autograde.log", "w") as log:
        code = subprocess.run(cmd, cwd=course, env=env, stdout=log, stderr=subprocess.STDOUT).returncode
    summary["nbgrader_exit"] = code
    for student, info in summary["students"].items():
        graded = (course / "autograded" / student / spec.ASSIGNMENT / f"{spec.NOTEBOOK}.ipynb").exists()
        info["graded"] = graded
        record = reports / "replay" / f"{student}.json"
        if record.exists():
            info["problems"] = json.loads(record.read_text()).get("problems", [])
    (reports / "batch.json").write_text(json.dumps(summary, indent=1))
    return summary


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("course", nargs="?", default=".")
    ap.add_argument("--force", action="store_true", help="grade every submission again")
    args, extra = ap.parse_known_args(argv)  # anything else goes to nbgrader (--Execute.timeout=...)
    course = Path(args.course).resolve()
    summary = run(course, force=args.force, nbgrader_args=extra)
    log = report_dir(course) / "autograde.log"
    for student, info in summary["students"].items():
        state = "graded" if info["graded"] else f"NOT GRADED (see {log})"
        print(f"{for_log(student)}: {state}")
        for note in info["preflight"] + info.get("problems", []):
            print(f"  - {for_log(html.unescape(note), 500)}")
    return 0 if all(i["graded"] for i in summary["students"].values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
