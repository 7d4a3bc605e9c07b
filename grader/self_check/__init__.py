"""A student's own check, offline, on their own machine: the grader's verdicts for a notebook
before it is handed in (check.py: `backprop-ninja check NOTEBOOK`; in Colab, colab.py). It runs
the judge the grader runs, on the student's own notebook, in a plain child process (it is their
own code, on their own machine): the references and the correct upstream gradients come from
autograd in this process, nothing from the instructor's notebook, and only torch and the
standard library are imported (a `pip install --no-deps` of the kit is enough)."""
