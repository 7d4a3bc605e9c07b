"""UseRemoteResult: the notebook a cluster worker autograded (grader/grading/cluster.py), in
place of the submission, so that the coordinator's `nbgrader autograde` only records it: the
submission and its grades in the gradebook, the files in autograded/, as nbgrader always does.
Used by the coordinator's finishing pass alone, never in nbgrader_config.py."""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbconvert.exporters.exporter import ResourcesDict
from nbformat.notebooknode import NotebookNode
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import NbGraderPreprocessor

from ..settings import report_dir

__all__ = ["UseRemoteResult", "staged_notebook"]


def staged_notebook(course: Path, student: str, notebook: str) -> Path:
    return report_dir(course) / "remote" / student / f"{notebook}.ipynb"


class UseRemoteResult(NbGraderPreprocessor):
    def preprocess(self, nb: NotebookNode, resources: ResourcesDict) -> tuple[NotebookNode, ResourcesDict]:
        info = resources["nbgrader"]
        course = Path(CourseDirectory(config=self.config).root)
        path = staged_notebook(course, info["student"], info["notebook"])
        if not path.is_file():
            raise FileNotFoundError(f"no result from the cluster for {info['student']} at {path}")
        return nbformat.read(path, as_version=4), resources
