"""grader/grading/workers.graded_in_gradebook on a real sqlite gradebook made with nbgrader's API:
one query for the class gives, student by student, what looking each submission up gives."""

from __future__ import annotations

import pytest
from nbgrader import api

from grader.exercise import spec
from grader.grading import workers

# a new gradebook asks `alembic` (a process) for its version
pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")]

OTHER = "another_assignment"


def _one_by_one(course, students: list[str]) -> set[str]:
    """The definition, a lookup a student: every kit grade of the notebook has its auto score."""
    done = set()
    with api.Gradebook(workers.db_url(course)) as gb:
        for student in students:
            try:
                nb = gb.find_submission_notebook(spec.NOTEBOOK, spec.ASSIGNMENT, student)
            except api.MissingEntry:
                continue
            ours = [g for g in nb.grades if g.name in spec.NINJA.by_grade_id]
            if ours and all(g.auto_score is not None for g in ours):
                done.add(student)
    return done


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """Students graded whole, in part, not at all; one with no submission, one with another
    assignment's only; a grade cell of another name in the notebook (not the kit's)."""
    folder = tmp_path_factory.mktemp("course")
    with api.Gradebook(workers.db_url(folder)) as gb:
        for assignment in (spec.ASSIGNMENT, OTHER):
            gb.add_assignment(assignment)
            gb.add_notebook(spec.NOTEBOOK, assignment)
            for g in spec.GRADED:
                gb.add_grade_cell(g.grade_id, spec.NOTEBOOK, assignment, max_score=g.points, cell_type="code")
        gb.add_grade_cell(
            "a_written_answer", spec.NOTEBOOK, spec.ASSIGNMENT, max_score=2, cell_type="markdown"
        )
        for student in ("whole", "part", "unscored", "unsubmitted", "elsewhere", "whole_too"):
            gb.add_student(student)
        for student in ("whole", "part", "unscored", "whole_too"):
            gb.add_submission(spec.ASSIGNMENT, student)
        gb.add_submission(OTHER, "elsewhere")
        for student in ("whole", "part", "whole_too", "elsewhere"):
            assignment = OTHER if student == "elsewhere" else spec.ASSIGNMENT
            for g in spec.GRADED[: -1 if student == "part" else None]:
                gb.find_grade(g.grade_id, spec.NOTEBOOK, assignment, student).auto_score = g.points / 2
        gb.db.commit()
    return folder


def test_one_query_gives_what_each_lookup_gives(course):
    everyone = ["whole", "part", "unscored", "unsubmitted", "elsewhere", "whole_too", "not_in_the_gradebook"]
    assert (
        workers.graded_in_gradebook(course, everyone)
        == _one_by_one(course, everyone)
        == {"whole", "whole_too"}
    )
    assert workers.graded_in_gradebook(course, ["whole", "part"]) == {"whole"}  # only those asked
    assert workers.graded_in_gradebook(course, []) == set()
