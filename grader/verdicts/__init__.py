"""Where a grade is decided (judge.py, grading.py, training.py) and explained (hints.py,
mistakes.py), with the static scan for signs of cheating (scan.py) and the flags it gives the
TAs, each with a kind and the grade ids it bears on (flags.py)."""
