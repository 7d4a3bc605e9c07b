"""`python -m grader.confine kernel -f CONNECTION_FILE`: the sandboxed kernel's launcher, as the
kernel spec (jupyter/kernels/*/kernel.json) starts it. Not a user's command: `backprop-ninja
check` tells whether the sandbox can start here (probe.py)."""

from __future__ import annotations

import sys

from .kernel import kernel_main


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] == "kernel" and argv[1] == "-f":
        return kernel_main(argv[2])
    print(
        "usage: python -m grader.confine kernel -f CONNECTION_FILE (the kernel spec's launcher)",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
