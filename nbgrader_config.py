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
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(HERE, "gradebook.db")

# names.txt travels with the notebook: the release step copies it, autograde restores it.
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback"]

# Exercise 4 trains for 1,000 steps under grading (about a second); 30 s per cell is ample.
c.Execute.timeout = 120

# Grades are decided by a replay of each submission on fresh inputs, outside the student's
# kernel (grader/judge.py); the in-kernel run only provides the outputs students see.
from nbconvert.preprocessors import ClearMetadataPreprocessor  # noqa: E402
from nbgrader.preprocessors import (AssignLatePenalties, CheckCellMetadata, Execute,  # noqa: E402
                                    IgnorePattern, LimitOutput, SaveAutoGrades)
from grader.preprocessor import ReplayGrades  # noqa: E402

c.Autograde.autograde_preprocessors = [
    Execute, ReplayGrades, IgnorePattern, ClearMetadataPreprocessor, LimitOutput,
    SaveAutoGrades, AssignLatePenalties, CheckCellMetadata,
]
c.ReplayGrades.seed_salt = "backprop-ninja-2026"
c.ReplayGrades.carried_credit = 1.0   # full credit for a right rule that received a wrong input
