"""For TAs: the submissions with signs of cheating, from the replay records.

`python -m grader.suspicious [COURSE]` prints them with their reasons and writes
COURSE/reports/suspicious.json. Grades follow the replay either way: this is a list to
look at, not a verdict.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ..settings import report_dir
from .quote import for_log


def collect(course: Path) -> dict[str, dict]:
    out = {}
    for path in sorted((report_dir(course) / "replay").glob("*.json")):
        record = json.loads(path.read_text())
        if record.get("suspicious"):
            out[record["student"]] = {
                "score": record["score"],
                "max_score": record["max_score"],
                "reasons": record["suspicious"],
                "findings": record.get("findings", []),
            }
    return out


def main(argv: list[str]) -> int:
    course = Path(argv[0] if argv else ".").resolve()
    found = collect(course)
    out = report_dir(course) / "suspicious.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(found, indent=1))
    if not found:
        print("no suspicious submissions")
    for student, info in found.items():
        print(f"{for_log(student)}: {info['score']:g}/{info['max_score']:g} (grade follows the replay)")
        for reason in info["reasons"][
            :8
        ]:  # they quote the student's code: no escape codes reach the terminal
            print(f"  - {for_log(reason, 300)}")
        if len(info["reasons"]) > 8:
            print(f"  - ... {len(info['reasons']) - 8} more in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
