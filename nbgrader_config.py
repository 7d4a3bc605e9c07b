"""nbgrader configuration for the Backprop Ninja course. Run nbgrader from this folder."""

import os

c = get_config()  # noqa: F821 (provided by nbgrader)

# One thread per kernel: torch's spinning thread pool slows a busy machine down 100-fold
# (measured: 0.3 s instead of 3 ms per training step when another job holds a core), and
# batch grading runs one submission per core anyway. Kernels inherit this environment.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

HERE = os.path.dirname(os.path.abspath(__file__))

c.CourseDirectory.root = HERE
c.CourseDirectory.course_id = "backprop_ninja"
# timeout: with several workers, a writer waits for the lock instead of failing ("database is locked")
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(HERE, "gradebook.db") + "?timeout=120"

# nbgrader's exchange in this folder (exchange/), so release/fetch/submit/collect and the
# formgrader's Release/Collect buttons work on one machine (grader/incoming/exchange.py); its
# collect takes a submission only from the account that made it (grader/incoming/inbound.py).
from grader.incoming.exchange import configure_exchange  # noqa: E402

configure_exchange(c, course_root=HERE)

# names.txt travels with the notebook: the release step copies it, autograde restores it.
# Files a browser would run (HTML, SVG, ...) are not copied either: the formgrader serves a
# submission's files from the TA's own origin (grader/incoming/intake.py).
from grader.incoming.intake import ACTIVE_FILE_PATTERNS  # noqa: E402

c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback"] + ACTIVE_FILE_PATTERNS

# Exercise 4 trains for 20 steps under grading (a tenth of a second); 120 s per cell is ample.
c.Execute.timeout = 120

# Grades are decided by a replay of each submission on fresh inputs, outside the student's
# kernel (grader/verdicts/judge.py); the in-kernel run only provides the outputs students see.
from nbconvert.preprocessors import ClearMetadataPreprocessor  # noqa: E402
from nbgrader.preprocessors import (  # noqa: E402
    AssignLatePenalties,
    ClearOutput,
    DeduplicateIds,
    IgnorePattern,
    LimitOutput,
    OverwriteKernelspec,
)

from grader import confine  # noqa: E402

# The kit's preprocessors are named, not imported: nbgrader imports them when it grades, so its
# other commands (export, generate_feedback, db) do not import torch. CheckCellMetadata is
# nbgrader's check with its schema's validator made once (0.2 s a submission); OverwriteCellsOnce
# and SaveAutoGradesOnce are nbgrader's OverwriteCells and SaveAutoGrades, reading a notebook's
# gradebook rows once and committing once (about 80 queries and 42 commits a submission fewer).
KIT = "grader.preprocessors."

# nbconvert validates the notebook after each preprocessor: 15 times a submission when grading
# (64 ms). Once, after the last, catches the same broken notebook.
c.Exporter.optimistic_validation = True

# Deleted, duplicated, moved or retyped cells: the notebook that runs is the instructor's
# with the student's answers and own cells put in place (grader/preprocessors/).
c.Autograde.sanitize_preprocessors = [
    ClearOutput,
    DeduplicateIds,
    KIT + "RebuildFromSource",
    OverwriteKernelspec,
    KIT + "OverwriteCellsOnce",
    KIT + "CheckCellMetadata",
]

# NeutraliseOutputs, right after the kernel ran: whatever the student's code displayed is made
# inert in the autograded notebook itself (no script runs in the formgrader or the feedback).
c.Autograde.autograde_preprocessors = [
    KIT + "LimitedExecute",
    KIT + "NeutraliseOutputs",
    KIT + "ReplayGrades",
    IgnorePattern,
    ClearMetadataPreprocessor,
    LimitOutput,
    KIT + "SaveAutoGradesOnce",
    AssignLatePenalties,
    KIT + "CheckCellMetadata",
]

# Student code runs in a sandbox (grader/confine/): the kernel through this kernel spec,
# the replay inside ReplayGrades. The sandbox has no network, not even localhost, so the
# kernel talks to nbgrader over IPC sockets. This grading process's runtime folder is its own
# (0700); LimitedExecute gives each kernel a socket folder inside it that only that
# kernel's sandbox sees, so no submission can reach another kernel's channels.
os.environ["JUPYTER_PATH"] = os.pathsep.join(
    [os.path.join(os.path.dirname(confine.__file__), "jupyter"), os.environ.get("JUPYTER_PATH", "")]
)
os.environ["JUPYTER_RUNTIME_DIR"] = confine.prepare_runtime_dir()
c.KernelManager.transport = "ipc"
c.KernelManager.ip = os.path.join(os.environ["JUPYTER_RUNTIME_DIR"], "kernel")  # replaced per kernel
c.Execute.kernel_name = "backprop-ninja-sandbox"
c.LimitedExecute.submission_timeout = 900  # seconds for all of one submission's cells
c.LimitedExecute.max_output_bytes = 2_000_000  # per cell
c.LimitedExecute.max_total_output_bytes = 20_000_000  # per submission, added cells included
# Where bubblewrap cannot start (`backprop-ninja check` says why), nothing is graded:
# each submission is refused with the reason. To grade anyway, only where no student can reach
# the grader (a loud warning; run as root, the kernel and the replay still get uids of their own):
# c.LimitedExecute.allow_unsandboxed = True  # or `backprop-ninja grade --allow-unsandboxed`
# Limits of every sandboxed process (kernel and replay) are BACKPROP_NINJA_* environment
# variables, listed with their defaults in grader/settings.py (6 GiB of memory, 256 processes,
# 64 MB files, 1 GiB of disk per submission, ...). To change one for the course, set it here:
# os.environ["BACKPROP_NINJA_DISK_MB"] = "2048"

# Before nbgrader copies a submission's folder: links, devices and other non-regular files
# are replaced (nbgrader's copy would follow them, as root), with a note for the student.
from grader.incoming.intake import before_autograde  # noqa: E402

c.Autograde.pre_convert_hook = before_autograde
c.ReplayGrades.seed_salt = "backprop-ninja-2026"
c.ReplayGrades.carried_credit = 1.0  # full credit for a right rule that received a wrong input
c.ReplayGrades.autograd_policy = "zero"  # a gradient autograd made gets 0; "flag": graded, and listed

# Feedback a student can read: a table of every gradient first, the hidden tests' source not
# shown (grader/preprocessors/feedback_summary.py). GetGrades must come before FeedbackSummary.
from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor  # noqa: E402
from nbgrader.preprocessors import GetGrades  # noqa: E402

c.GenerateFeedback.preprocessors = [GetGrades, KIT + "FeedbackSummary", CSSHTMLHeaderPreprocessor]
c.GenerateFeedback.exporter_class = KIT + "FeedbackExporter"
# ... and no copy of names.txt in every student's feedback folder
from grader.preprocessors.feedback_files import feedback_hook  # noqa: E402

c.GenerateFeedback.post_convert_hook = feedback_hook(HERE)
