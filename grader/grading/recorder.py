"""The coordinator's side of a cluster batch that writes the gradebook: each task's results are
recorded as they come back, while the workers grade the rest, by one resident nbgrader
(resident.py) running `nbgrader autograde` with the recording preprocessors (FINISH) on the
students staged so far. The last task's results are then all that is left to record, instead of
the whole class in one pass after the cluster's work.

What a command did not record (its process died, a notebook it could not read) is tried once
more at the end; the batch's summary reads the gradebook, so a student recorded by no attempt is
not graded there.
"""

from __future__ import annotations

import queue
import threading
from pathlib import Path

from ..exercise.graded import GradedExercise
from .resident import Resident
from .workers import autograde_args, graded_in_gradebook

# The workers' notebooks as they are (UseRemoteResult); the steps that write grades, as
# nbgrader_config.py names them (nbgrader's own CheckCellMetadata checks its schema each cell).
FINISH = [
    "--Autograde.sanitize_preprocessors=grader.preprocessors.use_remote_result.UseRemoteResult",
    *(
        f"--Autograde.autograde_preprocessors={name}"
        for name in (
            "grader.preprocessors.SaveAutoGradesOnce",
            "nbgrader.preprocessors.AssignLatePenalties",
            "grader.preprocessors.CheckCellMetadata",  # its schema's validator made once: 42 ms less
        )
    ),
]
_END = None


class Recorder:
    """`add` students staged by the cluster; `finish` waits for them all to be recorded."""

    def __init__(self, course: Path, exercise: GradedExercise, everyone: list[str], log: Path):
        self.course, self.exercise, self.everyone = course, exercise, everyone
        self.resident = Resident(course, log)
        self.added: list[str] = []
        self._todo: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._work, name="recorder", daemon=True)
        self._thread.start()

    def add(self, students: list[str]) -> None:
        self.added += students
        self._todo.put(list(students))

    def finish(self) -> set[str]:
        """The students recorded whole; the missing ones have had one more try."""
        self._todo.put(_END)
        self._thread.join()
        try:
            missing = sorted(set(self.added) - graded_in_gradebook(self.course, self.added, self.exercise))
            if missing:
                self._record(missing)
            return graded_in_gradebook(self.course, self.added, self.exercise)
        finally:
            self.resident.close()

    def _work(self) -> None:
        """One command for all that came back while the last one ran."""
        ended = False
        while not ended:
            items = [self._todo.get()]
            while not self._todo.empty():
                items.append(self._todo.get_nowait())
            ended = _END in items
            batch = [s for item in items if item is not _END for s in item]
            if batch:
                self._record(batch)

    def _record(self, students: list[str]) -> None:
        args = autograde_args(
            students, self.everyone, force=True, extra=FINISH, assignment=self.exercise.assignment
        )
        try:
            self.resident.run(*args)
        except OSError:  # its process could not start: finish() tries them once more
            pass
