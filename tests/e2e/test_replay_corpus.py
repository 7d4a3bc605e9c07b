"""The grading corpus through real `nbgrader autograde`: exact per-gradient scores, hints,
carried-error credit and cheat detection, read back from the gradebook and the records."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest

from grader.exercise import spec
from grader.incoming.submissions import write_submissions
from grader.reports.scores import read_scores
from grader.settings import seed_for

from conftest import ROOT, make_course, nbgrader, nbgrader_split, shown_cells
from corpus import CORPUS
from hint_corpus import HINTS, check_judged, check_lines, judged, verdict_text

ALL = [g.grade_id for g in spec.GRADED]


@pytest.fixture(scope="module")
def corpus_course(tmp_path_factory, new_course):
    """The corpus and the hint corpus graded with the repo's config (warm kernels) by plain
    nbgrader: two processes, each on half of the class, as `backprop-ninja grade` shares one."""
    course = new_course(tmp_path_factory.mktemp("corpus"))
    samples = [c.sample for c in CORPUS] + [h.sample for h in HINTS]
    write_submissions(samples, course=course)
    nbgrader_split(course, [s.student for s in samples], "autograde", "backprop_ninja", "--force")
    # the feedback test reads one student's; every other feedback flow has its own class
    nbgrader(course, "generate_feedback", "backprop_ninja", "--force", "--student=s05_equals")
    return course


def _record(course, student):
    return json.loads((course / "reports" / "replay" / f"{student}.json").read_text())


@pytest.fixture(scope="module")
def corpus_scores(corpus_course):
    """The gradebook's scores, read once (a read costs over a second: SQLAlchemy and nbgrader's API)."""
    return {s.student: s.by_grade_id for s in read_scores(f"sqlite:///{corpus_course / 'gradebook.db'}")}


@pytest.mark.parametrize("case", CORPUS, ids=[c.sample.student for c in CORPUS])
def test_scores(corpus_scores, case):
    scores = corpus_scores
    expected = {gid: 0.0 if gid in case.zeros else spec.BY_GRADE_ID[gid].points for gid in ALL}
    assert scores[case.sample.student] == expected


@pytest.mark.parametrize("case", CORPUS, ids=[c.sample.student for c in CORPUS])
def test_hints_carried_and_suspicion(corpus_course, case):
    record = _record(corpus_course, case.sample.student)
    for gid, text in case.hints.items():
        assert text in (record["verdicts"][gid]["hint"] or ""), record["verdicts"][gid]
    for gid in case.carried:
        assert record["verdicts"][gid]["carried"], gid
        assert "your rule is right" in "\n".join(record["verdicts"][gid]["lines"])
    # every failed gradient explains itself
    for gid in case.zeros:
        v = record["verdicts"][gid]
        assert v["hint"] or len(v["lines"]) > 1, (gid, v)
    assert bool(record["flags"]) == case.suspicious, record["flags"]
    assert not record["problems"], record["problems"]


def test_feedback_carries_the_replay_verdicts(corpus_course):
    html = (corpus_course / "feedback" / "s05_equals" / spec.ASSIGNMENT / f"{spec.NOTEBOOK}.html").read_text()
    assert "FAIL ex1_dcounts: 0/1 points" in html
    assert "but not the part through `probs`" in html.replace("&#96;", "`")
    assert "your rule is right; it received a wrong" in html.replace("&#96;", "`")


def test_cheats_are_listed_for_tas(corpus_course):
    out = subprocess.run(
        [sys.executable, "-m", "grader", "suspicious", str(corpus_course)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    listed = json.loads((corpus_course / "reports" / "suspicious.json").read_text())
    assert isinstance(listed, list)
    signs = [e for e in listed if e["kind"] != "similar"]  # pairs are similarity.py's to test
    cheats = {c.sample.student for c in CORPUS if c.suspicious}
    assert {s for e in signs for s in e["students"]} == cheats
    assert all(len(e["students"]) == 1 and e["evidence"] for e in signs)
    for student in cheats:
        assert student in out

    def kinds(student, text):
        return {e["kind"] for e in signs if e["students"] == [student] and text in e["evidence"]}

    ex1 = [g.grade_id for g in spec.GRADED if g.exercise == 1]
    assert kinds("c01_copy_grad", "reads .grad") == {"autograd"}
    assert {"ex2_dlogits"} in [set(e["grade_ids"]) for e in signs if e["students"] == ["c01_copy_grad"]]
    assert kinds("c02_autograd", "torch.autograd") == {"autograd"}
    assert kinds("c03_monkeypatch", "replaces torch.allclose") == {"tampering"}
    assert kinds("c04_from_file", "loads a file") == {"file"}
    assert kinds("c05_frames", "introspects the interpreter") == {"introspection"}
    kernel = [e for e in signs if e["students"] == ["c03_monkeypatch"] and e["kind"] == "kernel"]
    assert len(kernel) == 1 and "matched autograd in the student's kernel" in kernel[0]["evidence"]
    assert len(kernel[0]["grade_ids"]) == 24 and set(kernel[0]["grade_ids"]) <= set(ex1)
    assert all(e["grade_ids"] == ex1 for e in signs if e["evidence"].startswith("ex1_solution, line"))
    # what the replay saw at run time: the gradients autograd made, each route named
    made = {
        e["students"][0]: e for e in signs if e["evidence"].startswith("right only when autograd could run")
    }
    made_by = {"a01_enable_grad", "a02_backward", "a03_func", "a04_forward_mode", "a05_decoded", "a07_unhook"}
    made_by |= {"d01_aten", "d02_decomp", "d03_conv", "d06_signal_unhook"}
    assert set(made) == made_by
    for case in (c for c in CORPUS if c.sample.student in made):
        assert set(made[case.sample.student]["grade_ids"]) == case.zeros, case.sample.student
    assert "grad mode (torch.enable_grad" in made["a01_enable_grad"]["evidence"]
    assert "Tensor.backward" in made["a02_backward"]["evidence"]
    assert "torch.func.jacrev" in made["a03_func"]["evidence"]
    assert "torch.autograd.forward_ad.dual_level" in made["a04_forward_mode"]["evidence"]
    # a06: both calls refused, nothing made, nothing got under: the scan's signs alone
    assert all(
        e["evidence"].startswith("ex1_solution, line")
        for e in signs
        if e["students"] == ["a06_kept_original"]
    )
    assert kinds("a07_unhook", "imports ctypes") == {"tampering"}
    # torch's own derivative code: the runs name the first refusal each as-submitted run met,
    # the scan every op
    assert "aten::nll_loss_backward" in made["d01_aten"]["evidence"]
    assert kinds("d01_aten", "uses torch's derivative op tanh_backward") == {"autograd"}
    assert kinds("d01_aten", "uses torch's derivative op native_batch_norm_backward") == {"autograd"}
    assert "torch._decomp.decompositions.nll_loss_backward" in made["d02_decomp"]["evidence"]
    assert kinds("d02_decomp", "uses torch._decomp") == {"autograd"}
    assert kinds("d02_decomp", "uses torch's derivative op _softmax_backward_data") == {"autograd"}
    assert "torch.nn.grad.conv1d_input" in made["d03_conv"]["evidence"]
    assert "torch.nn.grad.conv1d_weight" in made["d03_conv"]["evidence"]
    assert kinds("d03_conv", "imports torch.nn.grad") == {"autograd"}
    # finite differences: the numeric bound's flag
    for student in ("d04_fd_batched", "d05_fd_loop"):
        numeric = [e for e in signs if e["students"] == [student] and e["kind"] == "numeric"]
        assert len(numeric) == 1 and "CPU s" in numeric[0]["evidence"], student
        assert set(numeric[0]["grade_ids"]) == set(ex1), student
    # signal handlers: refused in the graded runs, listed; the reading one changes no grade
    refused = "tried to get under the kit's autograd check: signal.signal"
    assert kinds("d06_signal_unhook", refused) == {"tampering"}
    assert "grad mode (torch.enable_grad" in made["d06_signal_unhook"]["evidence"]
    assert kinds("d07_signal_reads", refused) == {"tampering"}
    assert kinds("d07_signal_reads", "uses the signal module (signal.setitimer)") == {"tampering"}
    assert [
        e["grade_ids"] for e in signs if e["students"] == ["d07_signal_reads"] and refused in e["evidence"]
    ] == [[]]
    assert not [e for e in signs if "a08_checks_with_autograd" in e["students"]]  # its vectorised
    # answer is s02's, though: similarity.py lists the two as a pair


def test_kernel_scores_are_not_trusted(corpus_course):
    """The monkeypatching cheat passes every check in its own kernel; the gradebook holds the replay's."""
    record = _record(corpus_course, "c03_monkeypatch")
    fooled = "matched autograd in the student's kernel"
    kernel_fooled = [f for f in record["flags"] if fooled in f["evidence"]]
    assert len(kernel_fooled) == 24


def test_carried_credit_is_configurable(tmp_path, new_course):
    """Half credit for a right rule fed a wrong input, set on the command line like any nbgrader option."""
    course = new_course(tmp_path / "half")
    write_submissions([c.sample for c in CORPUS if c.sample.student == "s05_equals"], course=course)
    nbgrader(course, "autograde", "backprop_ninja", "--force", "--ReplayGrades.carried_credit=0.5")
    scores = read_scores(f"sqlite:///{course / 'gradebook.db'}")[0].by_grade_id
    record = _record(course, "s05_equals")
    carried = {gid for gid, v in record["verdicts"].items() if v["carried"]}
    # everything computed from dcounts inherits its error; db1 is zero whatever comes in
    ex1 = [g.grade_id for g in spec.GRADIENTS if g.exercise == 1]
    assert carried == set(ex1[ex1.index("ex1_dcounts") + 1 :]) - {"ex1_db1"}
    assert all(scores[gid] == 0.5 for gid in carried)
    assert scores["ex1_dcounts"] == 0.0
    assert scores["ex1_db1"] == 1.0
    assert sum(scores[g] for g in ex1) == 26 - 1 - 0.5 * len(carried)


def test_autograd_policy_flag_grades_as_allowed_and_lists(tmp_path, new_course):
    """`--ReplayGrades.autograd_policy=flag`: autograd's gradients keep their points, and are listed."""
    course = new_course(tmp_path / "flag")
    chosen = ("a03_func", "a08_checks_with_autograd")
    write_submissions([c.sample for c in CORPUS if c.sample.student in chosen], course=course)
    nbgrader(course, "autograde", "backprop_ninja", "--force", "--ReplayGrades.autograd_policy=flag")
    scores = {s.student: s.by_grade_id for s in read_scores(f"sqlite:///{course / 'gradebook.db'}")}
    assert all(sum(scores[student].values()) == spec.total_points() for student in chosen)
    flagged = [
        f
        for f in _record(course, "a03_func")["flags"]
        if f["kind"] == "autograd" and "allowed" in f["evidence"]
    ]
    zeros = next(c.zeros for c in CORPUS if c.sample.student == "a03_func")
    assert len(flagged) == 1 and set(flagged[0]["grade_ids"]) == zeros
    assert not _record(course, "a08_checks_with_autograd")["flags"]


# Cases that differ from s01_reference in a formula only: their kernels run what s01's runs (no
# error, no name of the notebook's rebound, no cell added, nothing of the process read or changed),
# so they tell the cold kernel from the warm one nothing s01's does not.
FORMULA_ONLY = {
    "s02_vectorised",
    "s04_bessel",
    "s05_equals",
    "s06_log",
    "s07_tanh",
    "s08_transposed",
    "s09_axis",
    "s10_branch",
    "s12_alias",
    "s14_two",
}
COLD = [c for c in CORPUS if c.sample.student not in FORMULA_ONLY]


@pytest.fixture(scope="module")
def cold_corpus_course(tmp_path_factory, names_txt, corpus_course):
    """The corpus graded with cold kernels (a Python started per submission): the reference
    the warm kernels, the default, must reproduce. Every case but those that differ from the
    right answer in a formula only (the hint corpus's kernels are such kernels too). Two
    nbgrader processes, each on half of them: a cold kernel keeps about one core busy."""
    course = make_course(tmp_path_factory.mktemp("corpus-cold"), names_txt)
    students = [c.sample.student for c in COLD]
    shutil.copytree(corpus_course / "release", course / "release")
    for student in students:
        shutil.copytree(corpus_course / "submitted" / student, course / "submitted" / student)
    shutil.copy(corpus_course / "gradebook.db", course / "gradebook.db")
    nbgrader_split(
        course, students, "autograde", "backprop_ninja", "--force", "--LimitedExecute.warm_kernels=False"
    )
    return course


def test_formula_only_cases_are_formulas_only():
    """What FORMULA_ONLY claims, as far as the corpus's definitions tell: the solution cells
    edited, no cell added, no answer that raises."""
    cases = {c.sample.student: c for c in CORPUS}
    assert set(cases) > FORMULA_ONLY and len(COLD) == len(CORPUS) - len(FORMULA_ONLY)
    solutions = {f"ex{k}_solution" for k in (1, 2, 3, 4)}
    for student in FORMULA_ONLY:
        sample = cases[student].sample
        assert not sample.added and not sample.blank, student
        assert set(sample.replace) | set(sample.edits) <= solutions, student
        assert not any("raise" in h for h in cases[student].hints.values()), student


def test_warm_kernels_give_the_cold_grades(corpus_course, cold_corpus_course):
    db = lambda c: f"sqlite:///{c / 'gradebook.db'}"  # noqa: E731
    cold_students = {c.sample.student for c in COLD}
    warm = {s.student: s.by_grade_id for s in read_scores(db(corpus_course)) if s.student in cold_students}
    cold = {
        s.student: s.by_grade_id for s in read_scores(db(cold_corpus_course)) if s.student in cold_students
    }
    assert warm == cold
    assert len(warm) == len(COLD)


@pytest.mark.parametrize("case", COLD, ids=[c.sample.student for c in COLD])
def test_warm_kernels_give_the_cold_notebooks(corpus_course, cold_corpus_course, case):
    rel = f"autograded/{case.sample.student}/{spec.ASSIGNMENT}/{spec.NOTEBOOK}.ipynb"
    warm, cold = shown_cells(corpus_course / rel), shown_cells(cold_corpus_course / rel)
    assert len(warm) == len(cold)
    for i, (w, c) in enumerate(zip(warm, cold)):
        assert w == c, f"cell {i}"
    # the first cells a warm kernel takes in one round trip are counted as if each ran alone
    assert _counts(corpus_course / rel) == _counts(cold_corpus_course / rel)


def _counts(path) -> list:
    return [
        c.get("execution_count") for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"
    ]


# ---------------------------------------------------------------- the hint corpus (tests/hint_corpus.py)
@pytest.mark.parametrize("case", HINTS, ids=[h.sample.student for h in HINTS])
def test_each_hint_names_the_mistake(corpus_course, case):
    verdict = _record(corpus_course, case.sample.student)["verdicts"][case.grade_id]
    assert judged(case, verdict_text(verdict)) == [], verdict_text(verdict)


CHECKED = [h for h in HINTS if h.check_of]


@pytest.mark.parametrize("case", CHECKED, ids=[h.sample.student for h in CHECKED])
def test_the_students_own_check_names_the_mistake(corpus_course, case):
    nb = json.loads(_autograded(corpus_course, case.sample.student).read_text())
    said = check_lines(nb["cells"], case.check_of)
    assert said and check_judged(case, said) == [], said


def _autograded(course, student):
    return course / "autograded" / student / spec.ASSIGNMENT / f"{spec.NOTEBOOK}.ipynb"


# ------------------------------------------------------- the student's own check (grader/self_check/)
def _grader_seed(student: str) -> int:
    salt = re.search(
        r'^c\.ReplayGrades\.seed_salt = "([^"]+)"$', (ROOT / "nbgrader_config.py").read_text(), re.M
    )
    return seed_for(student, salt.group(1))


@pytest.fixture(scope="module")
def checked(corpus_course, names_txt):
    """`backprop-ninja check`'s record of every submission of the grading corpus (right answers,
    each classic mistake, carried errors, every cheat), as its student would run it on the
    notebook handed in (not nbgrader's rebuild of it), with the seed the grader drew for that
    student. (The hint corpus's 43 agreed too when measured: 100 s more of the suite's time.)"""
    from grader.self_check.check import check_notebook

    students = [c.sample.student for c in CORPUS]
    return {
        s: check_notebook(
            corpus_course / "submitted" / s / spec.ASSIGNMENT / f"{spec.NOTEBOOK}.ipynb",
            names_txt=names_txt,
            seed=_grader_seed(s),
        )
        for s in students
    }


@pytest.mark.parametrize("student", [c.sample.student for c in CORPUS])
def test_the_students_own_check_gives_the_graders_verdicts(corpus_course, checked, student):
    graded, mine = _record(corpus_course, student)["verdicts"], checked[student]["verdicts"]
    fields = ("score", "carried", "hint")
    assert {g: [v[f] for f in fields] for g, v in mine.items()} == {
        g: [v[f] for f in fields] for g, v in graded.items()
    }
