"""`backprop-ninja check`: whether the bubblewrap sandbox can run a submission here, and if not,
why (probe.py finds the reason; bwrap.py asks once per process)."""

from __future__ import annotations

import argparse

from .bwrap import sandbox_status


def main(argv: list[str]) -> int:
    """`backprop-ninja check`: the sandbox's status here, with the reason when it cannot start."""
    ap = argparse.ArgumentParser(
        prog="backprop-ninja check",
        description="Whether the bubblewrap sandbox can run a submission here, and if not, why.",
    )
    ap.parse_args(argv)
    status = sandbox_status()
    print(f"bubblewrap sandbox: {'available' if status.works else 'NOT available: ' + status.reason}")
    return 0
