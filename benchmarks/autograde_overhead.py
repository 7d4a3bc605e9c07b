"""What the replay and the sandbox add to autograding, per submission.

Three runs of `nbgrader autograde` on the same N submissions in a throw-away course:
  baseline  plain nbgrader: the student's kernel, unsandboxed, grades from in-kernel tests
  replay    + the replay on fresh inputs (unsandboxed)
  kit       + the sandbox for the kernel and the replay (the kit's configuration)
Prints seconds and ratios; asserts nothing (shared machines are noisy).

    .venv/bin/python benchmarks/autograde_overhead.py [N]
"""

from __future__ import annotations

import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from grader.incoming.submissions import Sample, write_submissions  # noqa: E402

from conftest import find_names_txt, make_course, nbgrader  # noqa: E402
from corpus import CORPUS  # noqa: E402

UNSANDBOXED = [  # on purpose, as the kit refuses to grade unsandboxed unless told
    "--LimitedExecute.allow_unsandboxed=True",
    "--Execute.kernel_name=python3",
    "--KernelManager.transport=tcp",
    "--KernelManager.ip=127.0.0.1",
    "--ReplayGrades.sandboxed=False",
]
CONFIGS = {"baseline": UNSANDBOXED + ["--ReplayGrades.enabled=False"], "replay": UNSANDBOXED, "kit": []}


def main(n: int) -> None:
    names = find_names_txt()
    if names is None:
        sys.exit("names.txt not found: run `make data` or set NAMES_TXT")
    seconds, replay = {}, []
    with tempfile.TemporaryDirectory() as tmp:
        course = make_course(Path(tmp) / "course", names)
        nbgrader(course, "generate_assignment", "backprop_ninja", "--force")
        cases = [c.sample for c in CORPUS[:n]] + [
            Sample(f"ref{i:02d}", "reference") for i in range(n - len(CORPUS))
        ]
        write_submissions(cases, course=course)
        for name, args in CONFIGS.items():
            shutil.rmtree(course / "reports", ignore_errors=True)
            t0 = time.perf_counter()
            nbgrader(course, "autograde", "backprop_ninja", "--force", *args)
            seconds[name] = time.perf_counter() - t0
            if name == "kit":
                replay = [
                    json.loads(p.read_text())["replay_seconds"]
                    for p in (course / "reports" / "replay").glob("*.json")
                ]
    print(f"submissions: {n}")
    for name, s in seconds.items():
        print(f"{name:9s} {s:7.1f} s  {s / n:5.2f} s/submission")
    print(
        f"replay adds {(seconds['replay'] - seconds['baseline']) / n:+.2f} s/submission "
        f"(ratio replay/baseline {seconds['replay'] / seconds['baseline']:.3f})"
    )
    print(
        f"sandbox adds {(seconds['kit'] - seconds['replay']) / n:+.2f} s/submission "
        f"(ratio kit/replay {seconds['kit'] / seconds['replay']:.3f})"
    )
    print(
        f"replay inside the kit, its own clock: median {statistics.median(replay):.2f} s, "
        f"max {max(replay):.2f} s (the first starts the warm server)"
    )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
