"""What a student's feedback folder holds: the pages about their work, not the course's data.
nbgrader's generate_feedback copies every file of the autograded folder that
CourseDirectory.ignore does not name, and that one setting is every command's: names.txt
(228 KB a student) cannot be ignored there without the release and autograde losing it too.
So a post-convert hook takes it out of the kit's feedback folders once they are written."""

from __future__ import annotations

import functools
import os
from pathlib import Path

from ..exercise import spec

DATA_FILES = ("names.txt",)


def drop_data_files(*, assignment: str, student: str, notebooks=None, course_root: str, folder: str) -> None:
    """nbgrader's post_convert_hook for GenerateFeedback: FOLDER/<student>/<assignment>/ without
    the kit's data files (only regular files the feedback step itself copied). nbgrader passes
    the command's own student id, a glob ("*" unless --student), not the one just written."""
    if assignment != spec.ASSIGNMENT:
        return
    for where in Path(course_root, folder).glob(f"{student}/{assignment}"):
        for name in DATA_FILES:
            path = where / name
            if path.is_file() and not path.is_symlink():
                os.unlink(path)


def feedback_hook(course_root: str, folder: str = "feedback"):
    """For nbgrader_config.py: `c.GenerateFeedback.post_convert_hook = feedback_hook(HERE)`."""
    return functools.partial(drop_data_files, course_root=course_root, folder=folder)
