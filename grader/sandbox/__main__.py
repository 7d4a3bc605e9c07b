"""`python -m grader.sandbox kernel -f CONNECTION_FILE` (the kernel spec) or `check`."""

from __future__ import annotations

import sys

from .bwrap import sandbox_status
from .kernel import kernel_main


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] == "kernel" and argv[1] == "-f":
        return kernel_main(argv[2])
    if argv == ["check"]:
        status = sandbox_status()
        print(f"bubblewrap sandbox: {'available' if status.works else 'NOT available: ' + status.reason}")
        return 0
    print("usage: python -m grader.sandbox kernel -f CONNECTION_FILE | check", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
