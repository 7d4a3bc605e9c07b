"""setup.sh, before pip: may the image's python3 take the zip's requirements, and what differs.

The requirements are written for the Pythons in gradescope.json's "pythons" (requirements.py:
3.10 to 3.13, so Gradescope's Ubuntu 22.04 and 24.04 images). Here:
- older than those (Ubuntu 20.04's 3.8): the kit cannot run; says which image to choose and
  exits 1, so setup.sh stops before pip fails less clearly;
- newer than those: a warning (pip may find no wheel for a pin), and setup goes on;
- another minor than the build's: which packages this Python cannot take at the build's
  version ("not_exact"), so pip installs the newest release it supports instead (torch and
  the judge's code are the same; nbgrader may be an earlier 0.9).
Standard library only: it runs before anything is installed, on the image's python3.
"""

from __future__ import annotations

import json
import platform
import sys


def _minor(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split(".")[:2] if part.isdigit())


def check(settings: dict, here: str) -> tuple[bool, str | None]:
    """(whether setup may go on, what to tell staff) for Python `here` and gradescope.json."""
    pythons = settings.get("pythons") or []
    built = settings.get("python", "")
    if not pythons:
        return True, None
    minor = ".".join(here.split(".")[:2])
    if _minor(here) < _minor(pythons[0]):
        return False, (
            f"ERROR: this image's python3 is {here}; the kit needs Python {pythons[0]} or newer. "
            "Choose Gradescope's Ubuntu 22.04 (Python 3.10) or 24.04 (Python 3.12) base image."
        )
    if _minor(here) > _minor(pythons[-1]):
        return True, (
            f"WARNING: this image's python3 is {here}; the requirements are written for Python "
            f"{pythons[0]} to {pythons[-1]}: if pip finds no matching version, choose Ubuntu 24.04."
        )
    others = (settings.get("not_exact") or {}).get(minor) or []
    if _minor(here) == _minor(built) or not others:
        return True, None
    return True, (
        f"NOTE: the requirements were pinned on Python {built}; this image's python3 is {here}, "
        f"which takes the newest release it supports, not the build's, of: {', '.join(others)}."
    )


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        ok, note = check(json.load(f), platform.python_version())
    if note:
        print(note, file=sys.stderr)
    sys.exit(0 if ok else 1)
