"""What the replay adds to autograding, per submission.

Baseline: plain `nbgrader autograde` with the in-kernel test cells only
(`--ReplayGrades.enabled=False`). Candidate: the kit's autograde with the replay.
Both run on the same N submissions in a throw-away course. Prints seconds and ratios;
no threshold is asserted here (shared machines are noisy): the numbers go in the notes.

    .venv/bin/python benchmarks/replay_overhead.py [N]
"""
from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from conftest import find_names_txt, make_course, nbgrader  # noqa: E402
from corpus import CORPUS  # noqa: E402
from grader.submissions import Sample, write_submissions  # noqa: E402


def autograde(course: Path, *extra: str) -> float:
    t0 = time.perf_counter()
    nbgrader(course, "autograde", "backprop_ninja", "--force", *extra)
    return time.perf_counter() - t0


def main(n: int) -> None:
    names = find_names_txt()
    if names is None:
        sys.exit("names.txt not found: run `make data` or set NAMES_TXT")
    with tempfile.TemporaryDirectory() as tmp:
        course = make_course(Path(tmp) / "course", names)
        nbgrader(course, "generate_assignment", "backprop_ninja", "--force")
        cases = [c.sample for c in CORPUS[:n]]
        cases += [Sample(f"ref{i:02d}", "reference") for i in range(n - len(cases))]
        write_submissions(cases, course=course)
        base = autograde(course, "--ReplayGrades.enabled=False")
        full = autograde(course)
        replay = [json.loads(p.read_text())["replay_seconds"] for p in (course / "reports" / "replay").glob("*.json")]
    print(f"submissions: {n}")
    print(f"baseline (plain nbgrader autograde, in-kernel tests only): {base:7.1f} s  {base / n:5.2f} s/submission")
    print(f"with the replay:                                          {full:7.1f} s  {full / n:5.2f} s/submission")
    print(f"added per submission: {(full - base) / n:+.2f} s   ratio with/baseline: {full / base:.3f}")
    print(f"replay per submission (its own clock): mean {statistics.mean(replay):.2f} s, "
          f"median {statistics.median(replay):.2f} s, max {max(replay):.2f} s (the first starts the warm server)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
