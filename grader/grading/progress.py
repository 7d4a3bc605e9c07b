"""What the TA sees while a class is graded: a live bar on a terminal (done/total, rate,
ETA, failures), plain lines otherwise; and one line per finished submission in the log."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TextIO

from ..quote import for_log


class Progress:
    def __init__(self, total: int, *, log: Path, quiet: bool = False, stream: TextIO | None = None):
        self.total, self.count, self.failures = total, 0, 0
        self.stream = stream or sys.stderr
        self.log = open(log, "a")  # noqa: SIM115 - open for the whole batch
        self.start = time.monotonic()
        self.bar = None
        if not quiet and self.stream.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit="submission", file=self.stream, dynamic_ncols=True)

    def _line(self, text: str) -> None:
        stamp = time.strftime("%H:%M:%S")
        self.log.write(f"[{stamp}] {text}\n")
        self.log.flush()
        if self.bar is not None:
            self.bar.set_postfix(failed=self.failures, refresh=False)
            if not text.startswith("graded "):  # the bar counts those
                self.bar.write(text, file=self.stream)
        else:
            print(text, file=self.stream, flush=True)

    def done(self, student: str) -> None:
        self.count += 1
        if self.bar is not None:
            self.bar.update(1)
        self._line(f"graded {for_log(student)} ({self.count}/{self.total})")

    def failed(self, student: str, why: str, *, final: bool = True) -> None:
        """`final`: no further attempt comes."""
        self.failures += final
        what = "NOT GRADED" if final else "NOT GRADED yet (tried again at the end)"
        self._line(f"{what} {for_log(student)}: {for_log(why, 300)}")

    def note(self, text: str) -> None:
        self._line(text)

    def close(self) -> float:
        if self.bar is not None:
            self.bar.close()
        self.log.close()
        return time.monotonic() - self.start
