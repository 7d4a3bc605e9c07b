"""nbgrader configuration for the Backprop Ninja course. Run nbgrader from this folder."""
import os

c = get_config()  # noqa: F821 (provided by nbgrader)

HERE = os.path.dirname(os.path.abspath(__file__))

c.CourseDirectory.root = HERE
c.CourseDirectory.course_id = "backprop_ninja"
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(HERE, "gradebook.db")

# names.txt travels with the notebook: the release step copies it, autograde restores it.
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback"]

# Exercise 4 trains for 1,000 steps under grading (about a second); 30 s per cell is ample.
c.Execute.timeout = 120
