"""A course of the instructor's own, outside this repository: `backprop-ninja init COURSE`
(init.py). The files it starts from are this repository's own, linked here so that the
installed package carries them (a wheel holds the files the links point to): the course's
nbgrader_config.py and the instructor notebook of source/backprop_ninja/."""
