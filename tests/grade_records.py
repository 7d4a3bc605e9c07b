"""Snapshot and compare graded classes' replay records (every verdict, hint, flag, problem and
score), for a change that must not change grades: `python tests/grade_records.py snapshot ROOT...
OUT.json` reads every reports/replay/<student>.json under each ROOT (a suite run's basetemps
hold the corpus's and the hostile corpus's courses: make test's two phases have one each, and
an xdist worker's folder, popen-gwN/, is left out of the names); `compare A.json B.json` prints what differs.
Run times are not grades: a record's replay_seconds is left out, and times in problems and flags;
so is the old "suspicious" key, the flags said again."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

TIMING = re.compile(r"\d+(\.\d+)? ?(CPU )?s\b")  # run times in problems and flags vary from run to run


def _normal(record: dict) -> dict:
    # "suspicious" was each flag's "kind: evidence" line again (written until issue 18): "flags" holds it
    record = {k: v for k, v in record.items() if k not in ("replay_seconds", "suspicious")}
    record["problems"] = [
        TIMING.sub("<t>", p) if isinstance(p, str) else p for p in record.get("problems", [])
    ]
    record["flags"] = [
        dict(f, evidence=TIMING.sub("<t>", f.get("evidence", ""))) for f in record.get("flags", [])
    ]
    return record


WORKER = re.compile(r"^popen-gw\d+/")  # pytest-xdist's folder of one worker, in its basetemp


def snapshot(root: Path) -> dict:
    out = {}
    for path in sorted(root.glob("**/reports/replay/*.json")):
        course = WORKER.sub("", str(path.parents[2].relative_to(root)))
        try:
            out[f"{course}/{path.stem}"] = _normal(json.loads(path.read_text()))
        except ValueError:  # a record a test broke on purpose (or a run cut off while writing it)
            out[f"{course}/{path.stem}"] = {"unreadable": path.read_text()[:200]}
    return out


def compare(a: dict, b: dict) -> list[str]:
    diffs = [f"only in A: {k}" for k in sorted(a.keys() - b.keys())]
    diffs += [f"only in B: {k}" for k in sorted(b.keys() - a.keys())]
    for k in sorted(a.keys() & b.keys()):
        for field in sorted(a[k].keys() | b[k].keys()):
            if a[k].get(field) != b[k].get(field):
                diffs.append(f"{k}: {field}: {a[k].get(field)!r:.300} != {b[k].get(field)!r:.300}")
    return diffs


if __name__ == "__main__":
    if sys.argv[1] == "snapshot":
        records = {k: v for root in sys.argv[2:-1] for k, v in snapshot(Path(root)).items()}
        Path(sys.argv[-1]).write_text(json.dumps(records, indent=1, sort_keys=True))
    else:
        a, b = (json.loads(Path(p).read_text()) for p in sys.argv[2:4])
        diffs = compare(a, b)
        print("\n".join(diffs) or f"identical: {len(a)} records")
