"""Grading a class: `backprop-ninja grade` preflights every submission, resumes what was
interrupted, and runs `nbgrader autograde` on every core or on a Dask cluster."""
