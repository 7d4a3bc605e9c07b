"""Gradescope: the kit as a Gradescope autograder. build.py writes the zip to upload;
on Gradescope, setup.sh prepares the course once and run_autograder grades each submission
with the kit's own nbgrader pipeline (course.py), writing results.json (results.py)."""
