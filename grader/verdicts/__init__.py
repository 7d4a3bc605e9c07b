"""Where a grade is decided (judge.py, grading.py, training.py) and explained (hints.py,
mistakes.py), with the static scan for signs of cheating (scan.py)."""
