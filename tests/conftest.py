"""Shared fixtures of tests/unit and tests/e2e (pytest loads this file for both; the folders
have no __init__.py, so this folder is on sys.path and `from conftest import ...`,
`import corpus`, `import hostile`, `import replay_runs` work from either). The end-to-end
ones build a throw-away copy of the course in a temp folder and drive it with the real
nbgrader commands, so the working tree is untouched."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from grader.exercise.definitions.backprop_ninja import BLOCK_SIZE
from grader.grading.nbgrader_cli import nbgrader_call, run_nbgrader

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
JUDGE_SEED = 1234  # the `fresh` fixture's JudgeSettings.seed


UNIT = ROOT / "tests" / "unit"


class StartsAProcess(AssertionError):
    """A unit test (tests/unit, not marked integration) started a process."""


def _refuse(*args, **kwargs):
    raise StartsAProcess(
        "a unit test runs in-process: this one starts a process (a kernel, a server, a tool); "
        "mark it @pytest.mark.integration (its module: pytestmark = pytest.mark.integration)"
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """The unit tier is in-process (`make unit`); what starts processes is marked integration
    (`make integration`). Here a unit test that starts one, its fixtures' setup included, fails."""
    unit = Path(str(item.path)).is_relative_to(UNIT) and item.get_closest_marker("integration") is None
    if not unit:
        yield
        return
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(subprocess.Popen, "_execute_child", _refuse)
        mp.setattr(os, "fork", _refuse)
        mp.setattr(os, "posix_spawn", _refuse)
        mp.setattr(os, "posix_spawnp", _refuse)
        yield


# ---------------------------------------------------------------- make test's parallel phase
SHARED_CLASS = "graded_demo"  # the session fixture graded once: the modules that use it
SHARED_CLASS_MODULES = {  # share one worker (the collection checks that the list is complete)
    "tests/e2e/test_autograde.py",
    "tests/e2e/test_browser.py",
    "tests/e2e/test_class_report_flow.py",
    "tests/e2e/test_feedback.py",
}
# The longest groups, longest first (as measured on 2 cores): started first, they are not what
# the last minutes wait for. The modules that measure the machine (the hostile corpus's bounds,
# two concurrent batches) are groups like any other: each measures its own processes, disk and
# grades, and counts no process under another test run as its own.
LONGEST = [
    "tests/e2e/test_replay_corpus.py",
    "tests/e2e/test_hostile.py",
    SHARED_CLASS,
    "tests/e2e/test_isolation_concurrent.py",
    "tests/e2e/test_install_modes.py",
    "tests/e2e/test_tmp_footholds.py",
    "tests/e2e/test_cluster.py",
    "tests/e2e/test_own_course.py",
    "tests/e2e/test_gradescope.py",
    "tests/e2e/test_batch_interrupt.py",
    "tests/e2e/test_postgres.py",
    "tests/e2e/test_gradescope_sandbox.py",
    "tests/e2e/test_inert_in_browser.py",
    "tests/e2e/test_unsandboxed_refusal.py",
]


def worker_group(nodeid: str) -> str:
    """The worker group of a test: its module, or the graded demo class's modules together."""
    module = nodeid.split("::")[0]
    return SHARED_CLASS if module in SHARED_CLASS_MODULES else module


def _rank(item) -> int:
    group = worker_group(item.nodeid)
    if group in LONGEST:
        return LONGEST.index(group)
    return len(LONGEST) + (not item.nodeid.startswith("tests/e2e"))


@pytest.hookimpl(hookwrapper=True)
def pytest_collection_modifyitems(config, items):
    """The longest groups first (xdist hands groups out in this order, with
    --no-loadscope-reorder), and a module that uses the graded demo class must be listed."""
    using = {i.nodeid.split("::")[0] for i in items if SHARED_CLASS in getattr(i, "fixturenames", ())}
    if using - SHARED_CLASS_MODULES:
        raise pytest.UsageError(f"add {sorted(using - SHARED_CLASS_MODULES)} to SHARED_CLASS_MODULES")
    items.sort(key=_rank)  # stable: the rest keep their order
    yield


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadgroup`, as make test asks for it: each module's tests on one worker, so its
    fixtures (a graded corpus, a cluster) are built once, and the graded demo class's modules
    on one, so it is graded once. (xdist's own loadgroup renames node ids, which pytest 9
    ignores: every test went its own way, and the corpus was graded on both workers.)"""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Groups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return worker_group(nodeid)

    return Groups(config, log)


@pytest.fixture(scope="session", autouse=True)
def _one_torch_thread():
    """The tests' tensors are tiny: one intra-op thread is faster, and on a busy machine idle
    OpenMP workers make every op ~100x slower. Restored afterwards."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def manual_backward(
    Xb, Yb, emb, embcat, hprebn, bnvar_inv, bnraw, h, logits, C, W1, b1, W2, b2, bngain, bnbias
):
    """The lecture's exercise 4, as a student would write it (shared by the tests of both
    grading paths)."""
    n = Xb.shape[0]
    dlogits = F.softmax(logits, 1)
    dlogits[range(n), Yb] -= 1
    dlogits /= n
    dh = dlogits @ W2.T
    dW2 = h.T @ dlogits
    db2 = dlogits.sum(0)
    dhpreact = (1.0 - h**2) * dh
    dbngain = (bnraw * dhpreact).sum(0, keepdim=True)
    dbnbias = dhpreact.sum(0, keepdim=True)
    dhprebn = (
        bngain
        * bnvar_inv
        / n
        * (n * dhpreact - dhpreact.sum(0) - n / (n - 1) * bnraw * (dhpreact * bnraw).sum(0))
    )
    dembcat = dhprebn @ W1.T
    dW1 = embcat.T @ dhprebn
    db1 = dhprebn.sum(0)
    demb = dembcat.view(emb.shape)
    dC = torch.zeros_like(C)
    for k in range(Xb.shape[0]):
        for j in range(Xb.shape[1]):
            dC[Xb[k, j]] += demb[k, j]
    return [dC, dW1, db1, dW2, db2, dbngain, dbnbias]


def synthetic_batch(seed: int, batch_size: int, vocab_size: int = 27):
    """A batch of random contexts and labels (shapes as the lecture's), independent of names.txt."""
    g = torch.Generator().manual_seed(seed + 1)
    Xb = torch.randint(0, vocab_size, (batch_size, BLOCK_SIZE), generator=g)
    Yb = torch.randint(0, vocab_size, (batch_size,), generator=g)
    return Xb, Yb


def descendants(pid: int) -> list[int]:
    """Every process under `pid`, alive now (a parent before its children)."""
    parent = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        parent[int(entry)] = int(stat[stat.rindex(")") + 2 :].split()[1])
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parent.items() if pp == p]
        out += kids
        todo += kids
    return out


def find_names_txt() -> Path | None:
    for p in (
        os.environ.get("NAMES_TXT"),
        ROOT.parent / "shared" / "names.txt",
        ROOT / "source" / "backprop_ninja" / "names.txt",
    ):
        if p and Path(p).is_file():
            return Path(p)
    return None


@pytest.fixture(scope="session")
def names_txt() -> Path:
    p = find_names_txt()
    if p is None:
        pytest.skip("names.txt not found: set NAMES_TXT or run `make data`")
    return p


@pytest.fixture(scope="session")
def names_folder(tmp_path_factory, names_txt) -> Path:
    """A folder holding names.txt, where a written exercise's setup cells run (the GPT block's)."""
    folder = tmp_path_factory.mktemp("names")
    shutil.copy(names_txt, folder / "names.txt")
    return folder


def nbgrader(course: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run a real nbgrader command in `course`, with the virtualenv's bin/ on PATH (alembic)."""
    proc = run_nbgrader(course, *args, capture_output=True, text=True, timeout=1800)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"nbgrader {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
        )
    return proc


def nbgrader_split(course: Path, students: list[str], *args: str, ways: int = 2) -> None:
    """`nbgrader *args` in `course` as `ways` processes at once, each on its share of `students`
    (the others excluded with --CourseDirectory.student_id_exclude, as `backprop-ninja grade`'s workers
    do): the same nbgrader run for every submission, on as many cores."""
    import tempfile

    runs = []
    for k in range(ways):
        others = [s for i, s in enumerate(students) if i % ways != k]
        out = tempfile.TemporaryFile("w+")  # noqa: SIM115 - read after the process ends
        call = nbgrader_call(course, *args, f"--CourseDirectory.student_id_exclude={','.join(others)}")
        runs.append((subprocess.Popen(**call, stdout=out, stderr=subprocess.STDOUT), out))
    failed = []
    for proc, out in runs:
        proc.wait(timeout=1800)
        out.seek(0)
        if proc.returncode != 0:
            failed.append(f"({proc.returncode}) {' '.join(proc.args[1:])}:\n{out.read()[-5000:]}")
        out.close()
    assert not failed, "nbgrader failed " + "\n".join(failed)


def make_course(dest: Path, names: Path) -> Path:
    """A fresh course folder: the repo's source/ and nbgrader_config.py, plus names.txt."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "nbgrader_config.py", dest / "nbgrader_config.py")
    shutil.copytree(
        ROOT / "source", dest / "source", ignore=shutil.ignore_patterns("names.txt", ".ipynb_checkpoints")
    )
    shutil.copy(names, dest / "source" / "backprop_ninja" / "names.txt")
    return dest


def shown_cells(path: Path) -> list:
    """What a TA or student sees of an autograded notebook: each cell's source and outputs,
    without execution counts and timing; consecutive stream outputs joined (how a kernel's
    stdout is split into chunks depends on when it is flushed)."""
    out = []
    for c in json.loads(path.read_text())["cells"]:
        shown: list[list] = []
        for o in c.get("outputs", []):
            kind = o["output_type"] + ":" + o.get("name", "")
            text = o.get("text") or o.get("data", {}).get("text/plain") or o.get("ename")
            text = "".join(text) if isinstance(text, list) else text
            if shown and kind.startswith("stream") and shown[-1][0] == kind:
                shown[-1][1] += text
            else:
                shown.append([kind, text])
        out.append((c["cell_type"], "".join(c["source"]), shown))
    return out


def copy_course(src: Path, dest: Path) -> Path:
    """A copy of the course folder `src` at `dest`: the course's nbgrader_config.py names its
    own folder (c.CourseDirectory.root, the gradebook), so the copy is a course of its own."""
    shutil.copytree(src, dest, symlinks=True, dirs_exist_ok=True)
    return dest


@pytest.fixture(scope="session")
def _release_template(tmp_path_factory, names_txt) -> Path:
    """make_course and `nbgrader generate_assignment`, once for the session, in a folder no
    test is given: `new_course` hands out copies."""
    course = make_course(tmp_path_factory.mktemp("release_template"), names_txt)
    nbgrader(course, "generate_assignment", "backprop_ninja", "--force")
    return course


@pytest.fixture(scope="session")
def new_course(_release_template):
    """`new_course(dest)`: a fresh course at `dest` with the release generated, as
    make_course and `nbgrader generate_assignment` leave it (source/, release/, the gradebook
    with the assignment), copied rather than generated again in every module (~12 s each)."""
    return lambda dest: copy_course(_release_template, dest)


@pytest.fixture(scope="session")
def released_course(tmp_path_factory, new_course) -> Path:
    """A course with a freshly generated release."""
    return new_course(tmp_path_factory.mktemp("course"))


@dataclass(frozen=True)
class GradedDemo:
    course: Path
    report_stdout: str  # what `backprop-ninja report` printed


@pytest.fixture(scope="session")
def graded_demo(tmp_path_factory, new_course) -> GradedDemo:
    """The demo class graded once for the session by plain nbgrader with the repo's config
    (warm kernels): `nbgrader autograde` (two processes, each on half the class), `nbgrader
    generate_feedback`, then `backprop-ninja report` (the class report, the CSV exports).
    Never written to: each module that uses it takes its own copy (copy_course) of `.course`."""
    from grader.incoming.submissions import write_submissions
    from grader.reference.backprop_ninja.samples import DEMO

    course = new_course(tmp_path_factory.mktemp("graded_demo"))
    write_submissions(DEMO, course=course)
    nbgrader_split(course, [s.student for s in DEMO], "autograde", "backprop_ninja", "--force")
    nbgrader(course, "generate_feedback", "backprop_ninja", "--force")
    done = subprocess.run(
        [sys.executable, "-m", "grader", "report", str(course)], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return GradedDemo(course, done.stdout)


# ---------------------------------------------------------------- the lecture's data and a judge's inputs
@pytest.fixture(scope="session")
def lecture_words(names_txt) -> list[str]:
    """The lecture's names.txt (the offline substitute would not reproduce its numbers)."""
    import hashlib

    from grader.exercise.data import NAMES_SHA256

    digest = hashlib.sha256(names_txt.read_bytes()).hexdigest()
    if digest != NAMES_SHA256:
        pytest.skip(
            f"{names_txt} is not the lecture's names.txt (sha256 {digest[:12]}...): "
            "the lecture's numbers only hold for the original file"
        )
    return names_txt.read_text().splitlines()


@pytest.fixture(scope="session")
def lecture_dataset(lecture_words):
    from grader.exercise.definitions.backprop_ninja import network

    return network.load_dataset(lecture_words)


@pytest.fixture(scope="session")
def lecture_batch(lecture_dataset):
    """What the notebook builds: the lecture's parameters and its first batch of 32."""
    from grader.exercise.definitions.backprop_ninja import network

    params, g = network.init_params()
    Xb, Yb = network.draw_batch(lecture_dataset.Xtr, lecture_dataset.Ytr, g)
    return params, Xb, Yb


@pytest.fixture(scope="session")
def fresh(names_txt):
    """A judge's FreshInputs for seed JUDGE_SEED on names.txt (read only: tests copy before editing)."""
    from grader.reference.inputs import dataset, fresh_inputs
    from grader.settings import JudgeSettings

    return fresh_inputs(dataset(names_txt), JudgeSettings(seed=JUDGE_SEED))
