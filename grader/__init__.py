"""Backprop Ninja: an nbgrader kit that grades hand-written backprop on fresh inputs.

Folders by job; the trust boundary is the folder `untrusted/`:

- exercise/       the exercise, defined once: gradients, grade ids, points, the lecture's net
- untrusted/      runs WITH the student's code, inside the sandbox (imports only exercise/)
- confine/        builds the sandbox from outside: bubblewrap, limits, users, kernel launcher
- reference/      the answers: step rules, fresh inputs and reference gradients (never inside)
- replay/         the trusted side of the replay: plan, run, validate what comes back
- verdicts/       where a grade is decided (judge.py) and explained (hints, mistakes, scan)
- preprocessors/  the nbgrader plug-ins, one class per module
- course/         the TA's jobs: batch (all cores, or a Dask cluster), preflight, intake, report, ...
- settings.py     every setting and environment variable
- cli.py          the one command line, `backprop-ninja VERB` (also `python -m grader VERB`)
- incell.py       the one public import: the hidden tests' `from grader.incell import grade`
"""
