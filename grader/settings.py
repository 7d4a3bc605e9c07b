"""Every setting of the kit, and every limit of its trusted side, defined once.

- Grading choices are nbgrader traits, set in nbgrader_config.py. The judge's are the fields
  of JudgeSettings; `c.ReplayGrades.<field>` sets each (grader/preprocessors/replay_grades.py
  declares one trait per field, from this default and help). Some limits are traits too, declared
  where nbgrader configures them, with their defaults from here: LimitedExecute's
  (`c.LimitedExecute.max_output_bytes`, ...: "the kernel" below) and SafeCollect's
  `c.SafeCollect.max_per_student` ("intake").
- Limits of the processes nbgrader starts (the sandboxed kernel, which traits do not reach)
  are environment variables, listed in ENVIRONMENT with their defaults; nbgrader_config.py
  sets them and every process the grader starts inherits them.
- Every other limit of the trusted side (a bound on time, size, count or memory that protects
  the grader or bounds a student's run) is a plain constant here, one group per job: the
  analyses of a student's text (scan, similarity, preflight), intake, the kernel, the replay
  server, the replay's results, feedback, grading a class, Gradescope. No course has a reason
  to choose them (collect's two sizes are also its command-line options). Each module imports
  its own by name (`from ..settings import MAX_FILES`); tests/unit/test_settings.py fails on a
  module-level MAX_*, *_SECONDS, *_BYTES or *_MB number defined anywhere else in the trusted side.
- Not here: the untrusted side's (grader/untrusted/, grader/exercise/). The sandbox mounts only
  those two folders and they import nothing else of the kit, so this file is not there to read
  (tests/unit/untrusted/test_trust_boundary.py). The limits both sides use are defined in
  grader/untrusted/protocol.py, and the trusted side imports them from there: MAX_FRAME_BYTES
  (one run's result frame) and MAX_EVENTS (the autograd events a run reports). The untrusted
  side's own stay where they are used: grader/untrusted/server.py's MAX_RUN_BYTES (all a run may
  send), runner.py's cuts of what a run reports (the judge bounds them again, "the replay's
  results" below), grader/exercise/data.py's download timeout. Whatever of this file's values the
  untrusted side needs, the trusted side hands it: in the replay plan, a run's request, a KernelStart.
- Not here either: nbgrader's own (c.Execute.timeout, c.CourseDirectory.max_dir_size); and,
  still inline in grader/replay/run.py, the cap on the runs after one timed out (5 s) and the
  watch run's statement time (3 x statement_seconds). How much of a message, a log or a
  student's text one line quotes (grader/quote.py's lengths, the log tails) is not a limit: it
  is chosen where it is shown.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field, fields
from pathlib import Path

from .exercise.definitions.backprop_ninja import BATCH_SIZE

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
    batch_size: int = _setting(BATCH_SIZE, "Batch size of the replay (the lecture's 32 by default).")
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
        100.0,
        "An exercise's cells may take this many times the CPU time of the reference's derived "
        "backward at the run's pace (honest answers: 37 at most, 71 with a cell that burns CPU; "
        "finite differences: 126 and more); above it, twice, they computed numerically: no credit.",
    )
    numeric_floor_seconds: float = _setting(
        0.01, "CPU seconds an exercise's cells may always take, however fast the machine."
    )
    statement_seconds: float = field(default_factory=lambda: env("BACKPROP_NINJA_STATEMENT_SECONDS"))
    run_tmp_mb: int = field(default_factory=lambda: env("BACKPROP_NINJA_RUN_TMP_MB"))
    # the whole class's: class_seed_for(salt); None, the student's seed does for it too
    class_seed: int | None = None

    def __post_init__(self):
        if self.autograd_policy not in AUTOGRAD_POLICIES:
            raise ValueError(
                f"autograd_policy must be one of {AUTOGRAD_POLICIES}, not {self.autograd_policy!r}"
            )

    @property
    def training_seed(self) -> int:
        """Exercise 4's training run (its start and its batches) is the class's, not the student's:
        what it judges is the student's backward, whatever the start, and the judge's reference
        run (100 steps of autograd, most of the judge's own work on a submission) is then made
        once per class (reference/inputs.py)."""
        return self.seed if self.class_seed is None else self.class_seed

    @property
    def train_start_seed(self) -> int:
        """The parameters exercise 4's training run starts from."""
        return self.training_seed + 2

    @property
    def train_seed(self) -> int:
        """The batches of exercise 4's training run, the replay's and the reference's alike."""
        return self.training_seed + 3


def trait_settings() -> list:
    """The JudgeSettings fields that are nbgrader traits (those with a help text)."""
    return [f for f in fields(JudgeSettings) if "help" in f.metadata]


def seed_for(student: str, salt: str) -> int:
    """Fresh inputs per student, the same on every re-run (grading is idempotent)."""
    return int.from_bytes(hashlib.sha256(f"{salt}:{student}".encode()).digest()[:4], "big") + 1


def class_seed_for(salt: str) -> int:
    """What is the same for the whole class (exercise 4's training run), as unpredictable as the
    students' seeds: from the salt alone."""
    return int.from_bytes(hashlib.sha256(f"{salt}/class".encode()).digest()[:4], "big") + 1


# ------------------------------------------------------------ bounds of the analyses of student text
# The static scan (verdicts/scan.py), similarity (reports/similarity.py) and preflight
# (incoming/preflight.py) read text a student chose, so each has a size and a time budget per cell
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
HUGE_BYTES = 5 * 1024 * 1024  # preflight: a larger notebook's outputs are dropped (the grader re-makes them)
# similarity's canonical form (reports/canonical.py): statements per block past which the order is
# kept (ordering is quadratic: ~20,000 units)
MAX_SORTED_STATEMENTS = 200


# ------------------------------------------------------------ intake
# an LMS's zip (incoming/collect.py; `backprop-ninja collect --max-notebook-mb/--max-total-mb`)
MAX_NOTEBOOK_BYTES = 50 * 2**20  # one notebook, declared or as read: a larger entry is skipped
MAX_TOTAL_BYTES = 2 * 2**30  # all the notebooks taken from one zip, counted as they are read
MAX_ENTRIES = 100_000  # entries of one zip, else it is refused: zipfile lists them all on opening
# the exchange's inbound/ (incoming/inbound.py: what `nbgrader collect` takes)
# c.SafeCollect.max_per_student's default (exchange.py): a student's latest
# folders looked at, older ones not; a flood in their name costs a stat each
MAX_PER_STUDENT = 20
MAX_FILES = 10_000  # files and folders in one submission
MAX_DEPTH = 32  # folders inside folders of one submission


# ------------------------------------------------------------ the kernel
# The defaults of LimitedExecute's traits (preprocessors/limited_execute.py; c.LimitedExecute.<trait>)
MAX_OUTPUT_BYTES = 2_000_000  # max_output_bytes: output kept per cell, the rest dropped as it arrives
MAX_TOTAL_OUTPUT_BYTES = 20_000_000  # max_total_output_bytes: for the whole submission, added cells included
SUBMISSION_SECONDS = 900  # submission_timeout: all the cells of one submission; later ones are not run
START_ATTEMPTS = 3  # start_attempts: kernel starts tried before the cells are marked not run
# iopub_timeout: nbclient waits 4 s after a cell's reply for the outputs still unread, then raises:
# a loaded grader still reading a flood lost its last outputs and the truncation note
IOPUB_SECONDS = 30
# (confine/kernel.py) a submission folder bigger than this is not copied whole into the scratch
MAX_COPY_MB = 50
# the warm kernel server (confine/warm.py)
WARM_START_SECONDS = 120  # its start: torch's import on a loaded machine
WARM_FORK_SECONDS = 30  # its answer to a kernel's start (a fork); none: the kernel starts cold
WARM_END_SECONDS = 10  # the previous kernel's end, heard after it was killed
WARM_CLOSE_SECONDS = 5  # the server's own exit once its input is closed; then it is killed
# the sandbox (confine/)
PROBE_SECONDS = 60  # (probe.py) a loaded machine; a bwrap that hangs is a failure too
PROBE_TMP_MB = 256  # (bwrap.py) the probe's /tmp; a sandbox's own is BACKPROP_NINJA_TMP_MB
PACKAGE_LOOKUP_SECONDS = 120  # (bwrap.py) a `python -I` asked where it imports the kit from


# ------------------------------------------------------------ the replay server (replay/client.py)
REPLAY_START_SECONDS = 120.0  # its start: torch's import and the notebook's shared first cells
ANSWER_SLACK_SECONDS = 30.0  # an answer may come this long after the run's own timeout
MAX_HEADER_BYTES = 4096  # an answer's header line; a longer one: the server is not trusted
MAX_STATUS = 300  # characters of a run's status kept


# ------------------------------------------------------------ the replay's results
# A run's frame, at most MAX_FRAME_BYTES (grader/untrusted/protocol.py), is its JSON record, then a
# zip of tensors. The record (results.py):
MAX_META_BYTES = 2 * 1024 * 1024  # the JSON record
MAX_STR = 1000  # characters of a message (an error, ex4_error): the replay cuts its own messages at 300
MAX_NAMES = 2000  # names a run reports (its namespace's, an error's assigned ones)
MAX_ERRORS = 1000  # errors a run reports
MAX_ALIASES = 200  # pairs of names that hold the same tensor
MAX_N_AT = 16  # answer cells whose `n` a run reports
MAX_N_AT_CHARS = 40  # one such `n` when it is not a number (the replay cuts its repr at 40)
MAX_CPU = 200  # cells whose CPU time a run reports
MAX_EVENT_CHARS = 200  # characters of what one autograd event says
# the tensors (tensors.py)
MAX_PICKLE_BYTES = 256 * 1024  # the archive's index of tensors: a few kB when honest
MAX_ENTRY_BYTES = 8 * 1024 * 1024  # one tensor: a too-big one is refused by key, not by frame
MAX_NAME = 200  # characters of a name: an archive entry's, a tensor's description, one the record reports
MAX_NDIM = 4  # dimensions of a near-miss shape a hint may explain


# ------------------------------------------------------------ feedback
MAX_HINT = 300  # (preprocessors/feedback_summary.py) characters: hints quote student code and error messages


# ------------------------------------------------------------ grading a class (grading/)
WORKER_STOP_SECONDS = 30  # (workers.py) an nbgrader process told to stop (SIGTERM), then killed
FORKS_START_SECONDS = 300  # (nbgrader_forks.py) the batch's nbgrader server: its imports, then a fork
GRADEBOOK_LOCK_SECONDS = 120  # (remote.py) a cluster worker's SQLite gradebook, waiting for its lock
CLUSTER_RETRIES = 1  # (cluster.py) Dask's reruns of a submission's task that failed
RESIDENT_LOG_BYTES = 20_000_000  # (resident.py) a cluster worker's nbgrader log, emptied past this
CLUSTER_TASK_SUBMISSIONS = 8  # (cluster.py) a task's submissions at most: one command of a resident nbgrader


# ------------------------------------------------------------ Gradescope (gradescope/course.py)
AUTOGRADE_SECONDS = 3600  # Gradescope's own timeout (up to 40 min, set per assignment) comes first


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
