"""`backprop-ninja samples [COURSE]` writes the demo's sample class (Backprop Ninja's: a correct
submission and a few with the mistakes students typically make) into COURSE/submitted/."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..reference.backprop_ninja.samples import DEMO
from .submissions import write_submissions


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="backprop-ninja samples",
        description="Write the demo's sample class (a correct submission, typical mistakes) into submitted/.",
    )
    ap.add_argument("course", nargs="?", default=".", help="the course folder (default: .)")
    course = Path(ap.parse_args(argv).course).resolve()
    for path in write_submissions(DEMO, course=course):
        print(f"wrote {path.relative_to(course)}")
    return 0
