"""Code that runs with the student's code, inside the sandbox: the in-kernel checks, the replay
runner and its fork server, the warm kernel server. It imports nothing of the kit but
grader/exercise/ (a test checks). What it returns is validated by grader/replay/results.py before
use. Of this folder the trusted side imports protocol.py only (what both sides share, standard
library only; a test checks that too)."""
