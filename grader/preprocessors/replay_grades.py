"""ReplayGrades: after the kernel ran, replace each graded test cell's output with the judge's
verdict (grader/verdicts/judge.py), so the gradebook, the formgrader, the feedback and
`nbgrader export` all carry grades decided outside the student's kernel.

Enable in nbgrader_config.py: it goes right after the Execute step in
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
from traitlets import Bool, Enum, Float, Integer, Unicode

from ..confine import default_sandbox
from ..confine.probe import warning
from ..exercise import spec
from ..exercise.cells import nbgrader_meta
from ..exercise.verdict import Verdict
from ..quote import for_log
from ..replay.client import launch_plain
from ..settings import AUTOGRAD_POLICIES, REPORT_DIR, JudgeSettings, class_seed_for, seed_for, trait_settings
from ..verdicts.judge import JudgeRecord, judge_submission
from . import unsandboxed
from .limited_execute import LimitedExecute
from .scope import graded_exercise

__all__ = ["ReplayGrades", "verdict_outputs"]
_JUDGE = {f.name: f for f in trait_settings()}


def _judge_trait(name: str):
    """The trait of one JudgeSettings field: its default and help are defined there, once."""
    f = _JUDGE[name]
    if name == "autograd_policy":
        return Enum(AUTOGRAD_POLICIES, f.default, help=f.metadata["help"]).tag(config=True)
    kind = Integer if isinstance(f.default, int) and not isinstance(f.default, bool) else Float
    return kind(f.default, help=f.metadata["help"]).tag(config=True)


class ReplayGrades(NbGraderPreprocessor):
    enabled = Bool(
        True,
        help="Off: grades come from the in-kernel test cells alone (the "
        "benchmark's baseline; never for real grading).",
    ).tag(config=True)
    seed_salt = Unicode(
        "backprop-ninja",
        help="Mixed with the student id into the replay's seed. "
        "Change it per term so inputs cannot be predicted.",
    ).tag(config=True)
    sandboxed = Bool(
        True,
        help="Run the replay in the sandbox (grader/confine/): bubblewrap and resource limits. "
        "Where bubblewrap cannot start, the submission is not graded unless "
        "c.LimitedExecute.allow_unsandboxed (one switch for the kernel and the replay). "
        "False: a plain child process, deliberately (tests).",
    ).tag(config=True)
    report_dir = Unicode(
        REPORT_DIR,
        help="Where the per-student records go, relative to the course "
        "root (kept out of autograded/ so feedback does not copy them).",
    ).tag(config=True)
    batch_size = _judge_trait("batch_size")
    run_timeout = _judge_trait("run_timeout")
    total_timeout = _judge_trait("total_timeout")
    train_steps = _judge_trait("train_steps")
    carried_credit = _judge_trait("carried_credit")
    judge_seconds = _judge_trait("judge_seconds")
    autograd_policy = _judge_trait("autograd_policy")
    numeric_factor = _judge_trait("numeric_factor")
    numeric_floor_seconds = _judge_trait("numeric_floor_seconds")

    def judge_settings(self, student: str) -> JudgeSettings:
        return JudgeSettings(
            seed=seed_for(student, self.seed_salt),
            class_seed=class_seed_for(self.seed_salt),
            **{name: getattr(self, name) for name in _JUDGE},
        )

    def preprocess(self, nb: NotebookNode, resources: ResourcesDict) -> tuple[NotebookNode, ResourcesDict]:
        exercise = graded_exercise(resources, self.config)
        if exercise is None:
            return nb, resources
        if not self.enabled:
            self.log.warning("ReplayGrades is disabled: grades come from the student's own kernel")
            return nb, resources
        student, assignment = resources["nbgrader"]["student"], resources["nbgrader"]["assignment"]
        coursedir = CourseDirectory(config=self.config)
        root = Path(coursedir.root)
        folder = root / coursedir.source_directory / assignment  # the instructor's files (names.txt)
        in_kernel = {
            nbgrader_meta(c)["grade_id"]: _kernel_score(c, self.log)
            for c in nb.cells
            if is_grade(c) and nbgrader_meta(c).get("grade_id") in exercise.by_grade_id
        }
        problem = unsandboxed.replay_problem() if self.sandboxed else None
        unsandboxed.apply_rule(problem, allowed=self._allow_unsandboxed(), log=self.log)
        sandbox = default_sandbox() if self.sandboxed else None
        record = judge_submission(
            nb.cells,
            student=student,
            settings=self.judge_settings(student),
            names_txt=folder / "names.txt" if exercise is spec.NINJA else None,
            exercise=exercise,
            folder=folder,
            in_kernel=in_kernel,
            sandbox=sandbox,
            launcher=None if self.sandboxed else launch_plain,  # no sandbox: only when said so
        )
        if sandbox is None or problem:
            record.problems.insert(
                0, warning(problem) if sandbox else "the replay ran without a sandbox (sandboxed=False)"
            )
        for cell in nb.cells:
            gid = nbgrader_meta(cell).get("grade_id")
            if is_grade(cell) and gid in record.verdicts:
                cell.outputs = verdict_outputs(record.verdicts[gid], cell.get("execution_count"))
        self._report(exercise.records(root / self.report_dir), record)
        return nb, resources

    def _allow_unsandboxed(self) -> bool:
        """LimitedExecute's switch, as the configuration sets it (or its environment default)."""
        return LimitedExecute(config=self.config).allow_unsandboxed

    def _report(self, out: Path, record: JudgeRecord) -> None:
        who = for_log(record.student)
        for p in record.problems:
            self.log.warning("%s: %s", who, for_log(p, 500))
        if record.suspicious:
            self.log.warning("%s: %d suspicious signs (see %s)", who, len(record.suspicious), out)
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{record.student}.json").write_text(json.dumps(record.to_json(), indent=1))
        self.log.info(
            "%s: replay graded %g/%g in %.2f s",
            who,
            sum(v.score for v in record.verdicts.values()),
            sum(v.max_score for v in record.verdicts.values()),
            record.replay_seconds,
        )


def _kernel_score(cell, log) -> float:
    """What nbgrader would have read from the kernel's own output (for the suspicion check
    only). A student's output trick can make nbgrader's parser raise: that is not a score."""
    try:
        return float(determine_grade(cell, log)[0] or 0.0)
    except Exception:
        return 0.0


def verdict_outputs(verdict: Verdict, execution_count=None) -> list:
    """The verdict as nbgrader reads a test cell: text on stdout, the score as the result."""
    return [
        from_dict({"output_type": "stream", "name": "stdout", "text": verdict.text() + "\n"}),
        from_dict(
            {
                "output_type": "execute_result",
                "execution_count": execution_count,
                "metadata": {},
                "data": {"text/plain": repr(float(verdict.score))},
            }
        ),
    ]
