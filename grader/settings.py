"""Every setting of the kit, defined once.

- Grading choices are nbgrader traits, set in nbgrader_config.py. The judge's are the fields
  of JudgeSettings; `c.ReplayGrades.<field>` sets each (grader/preprocessors/replay_grades.py
  declares one trait per field, from this default and help).
- Limits of the processes nbgrader starts (the sandboxed kernel, which traits do not reach)
  are environment variables, listed in ENVIRONMENT with their defaults; nbgrader_config.py
  sets them and every process the grader starts inherits them.
- Bounds of the analyses of a student's text (scan, similarity, preflight) are plain
  constants: no course has a reason to choose them.
- The untrusted side (grader/untrusted/) reads none of these: the judge hands it the values
  it needs in the replay plan.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field, fields
from pathlib import Path

from .exercise import spec

# name -> (default, what it bounds)
ENVIRONMENT: dict[str, tuple[int | float | str, str]] = {
    "BACKPROP_NINJA_MEMORY_MB": (6144, "address space of each sandboxed process (torch maps ~2 GB)"),
    "BACKPROP_NINJA_PROCESSES": (256, "processes of one sandbox user: a fork bomb stops here"),
    "BACKPROP_NINJA_FILE_MB": (64, "the largest file a submission can write"),
    "BACKPROP_NINJA_CPU_SECONDS": (1200, "CPU time of each sandboxed process"),
    "BACKPROP_NINJA_OPEN_FILES": (512, "open files of each sandboxed process"),
    "BACKPROP_NINJA_DISK_MB": (1024, "all a submission writes: its kernel's folder and /tmp, both tmpfs"),
    "BACKPROP_NINJA_TMP_MB": (256, "of which the kernel's /tmp"),
    "BACKPROP_NINJA_RUN_TMP_MB": (256, "private /tmp and /dev/shm of each replay run"),
    "BACKPROP_NINJA_STATEMENT_SECONDS": (10.0, "one statement of the student's in the replay"),
    "BACKPROP_NINJA_FIRST_UID": (61000, "first uid of the sandbox users' pool"),
    "BACKPROP_NINJA_UID_COUNT": (1000, "size of that pool"),
    "BACKPROP_NINJA_ALLOW_UNSANDBOXED": (
        0,
        "1: grade even where the sandbox cannot start (staff's explicit choice: submissions then run "
        "without bubblewrap; grader/confine/probe.py)",
    ),
    "NAMES_TXT": ("", "a names.txt to use instead of downloading it (grader/exercise/data.py)"),
}


def env(name: str):
    """The variable's value, of its default's type; the default when unset or empty."""
    default = ENVIRONMENT[name][0]
    return type(default)(os.environ.get(name) or default)


# ------------------------------------------------------------ the judge's
AUTOGRAD_POLICIES = ("zero", "flag")
# CPU seconds of a replay run that the kernel may count beyond what the run's own per-cell count
# explains (loading its inputs, sending its results, page faults after the fork: about 0.1 s
# here) before the run counts as having changed its own count (grader/verdicts/numeric.py).
NUMERIC_UNACCOUNTED_SECONDS = 0.5


def _setting(default, help: str):
    return field(default=default, metadata={"help": help})


@dataclass
class JudgeSettings:
    seed: int  # per student: seed_for(student, salt)
    batch_size: int = _setting(spec.BATCH_SIZE, "Batch size of the replay (the lecture's 32 by default).")
    run_timeout: float = _setting(30.0, "Seconds for one run of the student's cells in the replay.")
    total_timeout: float = _setting(600.0, "Seconds for the whole replay of one submission.")
    train_steps: int = _setting(100, "Steps of the replay's exercise-4 training run.")
    carried_credit: float = _setting(
        1.0,
        "Share of a gradient's points when its rule is right but an "
        "upstream gradient it received was wrong (1 = full credit).",
    )
    judge_seconds: float = _setting(
        60.0,
        "Seconds for the judge's own verdicts on one submission; past "
        "them the submission's verdicts are 0 with a note.",
    )
    autograd_policy: str = _setting(
        "zero",
        'A gradient that is right only when autograd can run: "zero" (no credit, the default) '
        'or "flag" (graded as if autograd were allowed, and listed for review).',
    )
    numeric_factor: float = _setting(
        20.0,
        "An exercise's cells may take this many times the CPU time of a forward pass (or of the "
        "reference's derived backward, if more); above it they computed numerically (finite "
        "differences): no credit.",
    )
    numeric_floor_seconds: float = _setting(
        0.05, "CPU seconds an exercise's cells may always take, however fast a forward pass is."
    )
    statement_seconds: float = field(default_factory=lambda: env("BACKPROP_NINJA_STATEMENT_SECONDS"))
    run_tmp_mb: int = field(default_factory=lambda: env("BACKPROP_NINJA_RUN_TMP_MB"))

    def __post_init__(self):
        if self.autograd_policy not in AUTOGRAD_POLICIES:
            raise ValueError(
                f"autograd_policy must be one of {AUTOGRAD_POLICIES}, not {self.autograd_policy!r}"
            )

    @property
    def train_seed(self) -> int:
        """The batches of exercise 4's training run, the replay's and the reference's alike."""
        return self.seed + 3


def trait_settings() -> list:
    """The JudgeSettings fields that are nbgrader traits (those with a help text)."""
    return [f for f in fields(JudgeSettings) if "help" in f.metadata]


def seed_for(student: str, salt: str) -> int:
    """Fresh inputs per student, the same on every re-run (grading is idempotent)."""
    return int.from_bytes(hashlib.sha256(f"{salt}:{student}".encode()).digest()[:4], "big") + 1


# ------------------------------------------------------------ bounds of the analyses of student text
# The static scan (verdicts/scan.py), similarity (course/similarity.py) and preflight
# (course/preflight.py) read text a student chose, so each has a size and a time budget per cell
# and per submission (verdicts/budget.py counts the work and checks the deadline inside the
# loops, never interrupting anything). What is over a budget is skipped by that analysis with a
# sign saying so ("too_large"): too large to compare beats a stalled batch. An honest submission
# is far below each: its largest answer cell has ~1,500 characters and costs ~3,700 units of work
# in similarity, the whole submission ~7,000 (a unit: ~2-4 us).
# one cell's source the scan and similarity read; a larger one is not even parsed
ANALYSIS_CELL_CHARS = 32 * 1024
# all the cells of one submission the scan and similarity read
ANALYSIS_SUBMISSION_CHARS = 256 * 1024
# work on one cell: a syntax-tree node visited (at each nesting level that visits it), a token,
# a pair of statements put in order
ANALYSIS_CELL_WORK = 50_000
ANALYSIS_SUBMISSION_WORK = 200_000  # work on all the cells of one submission
ANALYSIS_CELL_SECONDS = 2.0  # one cell's scan, or its canonical form and fingerprints
ANALYSIS_SUBMISSION_SECONDS = 8.0  # all the cells of one submission, in the scan or in similarity
# the batch's end-of-run checks (similar pairs) may take the larger of END_CHECKS_SECONDS and
# END_CHECKS_SHARE of the batch's grading time; past it, who was not compared is listed
END_CHECKS_SECONDS = 60.0
END_CHECKS_SHARE = 0.10
NOTEBOOK_BYTES = 50 * 1024 * 1024  # preflight: a larger notebook file is not even read (graded as empty)
# preflight: cells of one notebook (nbformat validates ~5,000 a second; the hostile corpus has 2,070)
NOTEBOOK_CELLS = 5_000
NOTEBOOK_CELL_CHARS = 2 * 1024 * 1024  # preflight: one cell's source; a larger one is emptied, with a note
PREFLIGHT_SECONDS = 30.0  # preflight of one submission, checked between its steps; past it: graded as empty


# ------------------------------------------------------------ where records go
REPORT_DIR = "reports"  # c.ReplayGrades.report_dir's default, relative to the course root


def report_dir(course: Path) -> Path:
    """c.ReplayGrades.report_dir as the course sets it, under the course root."""
    return course / (course_config(course).get("ReplayGrades", {}).get("report_dir") or REPORT_DIR)


def db_url(course: Path) -> str:
    """c.CourseDirectory.db_url as the course sets it (SQLite in the course folder by default;
    PostgreSQL or any other SQLAlchemy URL when the course says so)."""
    return (
        course_config(course).get("CourseDirectory", {}).get("db_url")
        or f"sqlite:///{course / 'gradebook.db'}"
    )


_configs: dict[Path, object] = {}


def course_config(course: Path):
    """The course's nbgrader configuration: the running nbgrader's, or else the course's
    nbgrader_config.py (which every nbgrader command loads too); {} without one."""
    from traitlets.config import Application
    from traitlets.config.loader import PyFileConfigLoader

    if Application.initialized():
        return Application.instance().config
    course = course.resolve()
    if not (course / "nbgrader_config.py").is_file():
        return {}
    if course not in _configs:
        _configs[course] = PyFileConfigLoader("nbgrader_config.py", path=str(course)).load_config()
    return _configs[course]
