"""Backprop Ninja: an nbgrader kit that grades hand-written backprop on fresh inputs.

Folders by job; the trust boundary is the folder `untrusted/`:

- exercise/       the exercise, defined once: gradients, grade ids, points, the lecture's net
- untrusted/      runs WITH the student's code, inside the sandbox (imports only exercise/)
- confine/        builds the sandbox from outside: bubblewrap, limits, users, kernel launcher
- reference/      the answers: step rules, fresh inputs and reference gradients (never inside)
- replay/         the trusted side of the replay: plan, run, validate what comes back
- verdicts/       where a grade is decided (judge.py) and explained (hints, mistakes, scan)
- preprocessors/  the nbgrader plug-ins, one class per module
- incoming/       submissions coming in: an LMS zip, the exchange, intake, preflight, samples
- grading/        grading a class: the batch on every core or on a Dask cluster; nbgrader as a subprocess
- reports/        what TAs read afterwards: the table, the class report, exports, the suspicious list
- gradescope/     the Gradescope autograder
- settings.py     every setting and environment variable
- cli.py          the one command line, `backprop-ninja VERB` (also `python -m grader VERB`)
- incell.py       the one public import: the hidden tests' `from grader.incell import grade`
"""
