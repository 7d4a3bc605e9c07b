"""Code that runs with the student's code, inside the sandbox: the in-kernel checks, the replay
runner and its fork server. It imports nothing of the kit but grader/exercise/ (a test checks).
What it returns is validated by grader/replay/results.py before use."""
