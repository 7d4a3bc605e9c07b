"""grader/preprocessors/feedback_files.py in-process: the post-convert hook takes the kit's
data out of a student's feedback folder, and touches nothing else."""

from __future__ import annotations

from grader.exercise import spec
from grader.preprocessors.feedback_files import feedback_hook


def test_names_txt_leaves_the_kits_feedback_folder_only(tmp_path):
    ours = tmp_path / "feedback" / "alice" / spec.ASSIGNMENT
    other = tmp_path / "feedback" / "alice" / "hw0"
    for folder in (ours, other):
        folder.mkdir(parents=True)
        (folder / "names.txt").write_text("emma\n")
        (folder / "page.html").write_text("<p>")
    hook = feedback_hook(str(tmp_path))
    hook(assignment=spec.ASSIGNMENT, student="alice", notebooks=[])
    hook(assignment="hw0", student="alice", notebooks=[])
    assert sorted(p.name for p in ours.iterdir()) == ["page.html"]
    assert sorted(p.name for p in other.iterdir()) == ["names.txt", "page.html"]


def test_a_link_in_its_place_is_not_followed_or_removed(tmp_path):
    target = tmp_path / "elsewhere.txt"
    target.write_text("keep")
    folder = tmp_path / "feedback" / "bob" / spec.ASSIGNMENT
    folder.mkdir(parents=True)
    (folder / "names.txt").symlink_to(target)
    feedback_hook(str(tmp_path))(assignment=spec.ASSIGNMENT, student="bob", notebooks=None)
    assert target.read_text() == "keep" and (folder / "names.txt").is_symlink()


def test_nbgraders_student_glob_covers_every_folder_it_wrote(tmp_path):
    """nbgrader hands the hook its --student pattern ("*" by default), not one student's id."""
    for student in ("alice", "bob"):
        folder = tmp_path / "feedback" / student / spec.ASSIGNMENT
        folder.mkdir(parents=True)
        (folder / "names.txt").write_text("emma\n")
    feedback_hook(str(tmp_path))(assignment=spec.ASSIGNMENT, student="*", notebooks=[])
    assert not list((tmp_path / "feedback").glob("*/*/names.txt"))
