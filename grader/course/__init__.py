"""The TA's and instructor's jobs around nbgrader: batch grading, preflight and intake of
submissions, the grade table, the suspicious list, the sample class."""
