"""Writing an exercise from its definition (grader/exercise/definition.py): the instructor
notebook (notebook.py, its comparison cell in cmp_cell.py) and `backprop-ninja new` (new.py),
which puts it in a course folder. Trusted side: run by the instructor, never in the sandbox."""
