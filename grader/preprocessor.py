"""The nbgrader plug-in: after `Execute`, replace each gradient test cell's output with the
judge's verdict, so the gradebook, the formgrader, the feedback and `nbgrader export` all
carry grades decided outside the student's kernel.

Enable in nbgrader_config.py (see there): it goes right after Execute in
`c.Autograde.autograde_preprocessors`.
"""
from __future__ import annotations

import json
from pathlib import Path

from nbconvert.exporters.exporter import ResourcesDict
from nbformat.notebooknode import NotebookNode, from_dict
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import NbGraderPreprocessor
from nbgrader.utils import determine_grade, is_grade
from traitlets import Bool, Float, Integer, Unicode

from . import judge, spec
from .quote import for_log
from .sandbox import WARNING, default_sandbox


class ReplayGrades(NbGraderPreprocessor):
    enabled = Bool(True, help="Off: grades come from the in-kernel test cells alone (the "
                   "benchmark's baseline; never for real grading).").tag(config=True)
    seed_salt = Unicode("backprop-ninja", help="Mixed with the student id into the replay's seed. "
                        "Change it per term so inputs cannot be predicted.").tag(config=True)
    batch_size = Integer(32, help="Batch size of the replay (the lecture's 32 by default).").tag(config=True)
    carried_credit = Float(1.0, help="Share of a gradient's points when its rule is right but an "
                           "upstream gradient it received was wrong (1 = full credit).").tag(config=True)
    run_timeout = Float(30.0, help="Seconds for one run of the student's cells in the replay.").tag(config=True)
    total_timeout = Float(600.0, help="Seconds for the whole replay of one submission.").tag(config=True)
    train_steps = Integer(100, help="Steps of the replay's exercise-4 training run.").tag(config=True)
    judge_seconds = Float(60.0, help="Seconds for the judge's own verdicts on one submission; past "
                          "them the submission's verdicts are 0 with a note.").tag(config=True)
    sandboxed = Bool(True, help="Run the replay in the sandbox (grader/sandbox.py): bubblewrap "
                     "where available, resource limits always.").tag(config=True)
    report_dir = Unicode("reports", help="Where the per-student replay records go, relative to the "
                         "course root (kept out of autograded/ so feedback does not copy them).").tag(config=True)

    def preprocess(self, nb: NotebookNode, resources: ResourcesDict):
        if not self.enabled:
            self.log.warning("ReplayGrades is disabled: grades come from the student's own kernel")
            return nb, resources
        info = resources["nbgrader"]
        student, assignment = info["student"], info["assignment"]
        coursedir = CourseDirectory(config=self.config)
        root = Path(coursedir.root)
        names_txt = root / coursedir.source_directory / assignment / "names.txt"
        settings = judge.Settings(seed=judge.seed_for(student, self.seed_salt), batch_size=self.batch_size,
                                  run_timeout=self.run_timeout, total_timeout=self.total_timeout,
                                  train_steps=self.train_steps, carried_credit=self.carried_credit,
                                  judge_seconds=self.judge_seconds)
        in_kernel = {c.metadata.nbgrader["grade_id"]: _kernel_score(c, self.log)
                     for c in nb.cells if is_grade(c) and c.metadata.nbgrader.get("grade_id") in spec.BY_GRADE_ID}
        sandbox = default_sandbox() if self.sandboxed else None
        record = judge.judge_submission(nb.cells, student=student, settings=settings, names_txt=names_txt,
                                        in_kernel=in_kernel, sandbox=sandbox)
        if sandbox is None or not sandbox.isolated:
            record.problems.insert(0, WARNING if sandbox else "the replay ran without a sandbox (sandboxed=False)")
        for cell in nb.cells:
            gid = cell.metadata.get("nbgrader", {}).get("grade_id")
            if is_grade(cell) and gid in record.verdicts:
                cell.outputs = verdict_outputs(record.verdicts[gid], cell.get("execution_count"))
        for p in record.problems:
            self.log.warning("%s: %s", for_log(student), for_log(p, 500))
        if record.suspicious:
            self.log.warning("%s: %d suspicious signs (see %s)", for_log(student), len(record.suspicious), self.report_dir)
        out = root / self.report_dir / "replay"
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{student}.json").write_text(json.dumps(record.to_json(), indent=1))
        self.log.info("%s: replay graded %g/%g in %.2f s", for_log(student),
                      sum(v.score for v in record.verdicts.values()),
                      sum(v.max_score for v in record.verdicts.values()), record.replay_seconds)
        return nb, resources


def _kernel_score(cell, log) -> float:
    """What nbgrader would have read from the kernel's own output (for the suspicion check
    only). A student's output trick can make nbgrader's parser raise: that is not a score."""
    try:
        return float(determine_grade(cell, log)[0] or 0.0)
    except Exception:
        return 0.0


def verdict_outputs(verdict, execution_count=None) -> list:
    """The verdict as nbgrader reads a test cell: text on stdout, the score as the result."""
    return [from_dict({"output_type": "stream", "name": "stdout", "text": verdict.text() + "\n"}),
            from_dict({"output_type": "execute_result", "execution_count": execution_count, "metadata": {},
                       "data": {"text/plain": repr(float(verdict.score))}})]
