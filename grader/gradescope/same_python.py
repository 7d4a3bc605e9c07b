"""setup.sh, before pip: the requirements are pinned from the build's Python; another minor
version may have no wheel for some of them (numpy drops old Pythons), so say so first.
Standard library only: it runs before anything is installed."""

from __future__ import annotations

import json
import platform
import sys


def mismatch(built: str, here: str) -> str | None:
    minor = lambda v: v.split(".")[:2]  # noqa: E731
    if minor(built) == minor(here):
        return None
    return (
        f"WARNING: the requirements were pinned on Python {built}; this image's python3 is {here}. "
        "If pip finds no matching version, pick a Gradescope base image with the same Python "
        "or build the zip from a virtualenv of this one."
    )


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        note = mismatch(json.load(f).get("python", ""), platform.python_version())
    if note:
        print(note, file=sys.stderr)
