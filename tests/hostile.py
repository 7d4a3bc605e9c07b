"""The attack and bad-input corpus: each case writes one student's submission folder and
says what grading it must give. Honest neighbours are graded in the same batch."""

from __future__ import annotations

import base64
import copy
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import nbformat

from grader.exercise import spec
from grader.incoming.submissions import fill, reference_answers

import footholds
import hostile_payloads as P

EX1 = [g.grade_id for g in spec.GRADIENTS if g.exercise == 1]
EX4 = {g.grade_id for g in spec.GRADIENTS if g.exercise == 4}
ALL = [g.grade_id for g in spec.GRADED]
NB = f"{spec.NOTEBOOK}.ipynb"


@dataclass
class Case:
    student: str
    what: str
    write: Callable[[Path, dict], None]  # (submission folder, {"source", "release"})
    zeros: set[str] = field(default_factory=set)
    says: list = field(default_factory=list)  # text the feedback must show (a tuple: any of them)
    suspicious: bool | None = False  # None: not checked (the scan's rules do not decide it)
    at_most: bool = False  # the attack may spoil its own run: any grade up to this one


def _reference(nbs) -> nbformat.NotebookNode:
    return fill(nbs["release"], reference_answers(nbs["source"]))


def _write_nb(folder: Path, nb, name: str = NB) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, folder / name)


def honest(folder, nbs):
    _write_nb(folder, _reference(nbs))


def with_cell(after: str, code: str, *, answers: dict | None = None):
    """The reference answers (or others) plus one cell of the student's own."""

    def write(folder, nbs):
        ans = dict(reference_answers(nbs["source"]), **(answers or {}))
        nb = fill(nbs["release"], ans, [(after, code)])
        _write_nb(folder, nb)

    return write


def raw(data: bytes, name: str = NB):
    def write(folder, nbs):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)

    return write


def truncated(folder, nbs):
    text = nbformat.writes(_reference(nbs))
    raw(text[: len(text) // 2].encode())(folder, nbs)


def nbformat3(folder, nbs):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / NB).write_text(nbformat.writes(_reference(nbs), version=3))


def latin1(folder, nbs):
    nb = _reference(nbs)
    nb.cells[0].source += "\n\nRésumé"
    data = nbformat.writes(nb).encode("utf-8").replace("Résumé".encode("utf-8"), "Résumé".encode("latin-1"))
    raw(data)(folder, nbs)


def misnamed(folder, nbs):
    _write_nb(folder, _reference(nbs), name="backprop_ninja (1).ipynb")


def extra_files(folder, nbs):
    honest(folder, nbs)
    (folder / "junk.bin").write_bytes(b"\0" * 1_000_000)
    (folder / "answers.pt").write_bytes(b"not a tensor file")


def huge(folder, nbs):
    nb = _reference(nbs)
    png = base64.b64encode(b"\x89PNG" + b"\0" * 20_000_000).decode()
    for c in nb.cells:
        if c.cell_type == "code":
            c.outputs = [nbformat.v4.new_output("display_data", data={"image/png": png})]
            break
    _write_nb(folder, nb)


def _edited(edit):
    def write(folder, nbs):
        nb = _reference(nbs)
        edit(nb)
        _write_nb(folder, nb)

    return write


def _gid(c):
    return c.metadata.get("nbgrader", {}).get("grade_id")


def delete_cells(nb):
    nb.cells = [c for c in nb.cells if _gid(c) not in ("ex2_solution", "ex1_dh", "ex1_dW2", "ex3_dhprebn")]


def duplicate_and_move(nb):
    i = next(i for i, c in enumerate(nb.cells) if _gid(c) == "ex1_dlogprobs")
    nb.cells.insert(i, copy.deepcopy(nb.cells[i]))
    j = next(i for i, c in enumerate(nb.cells) if _gid(c) == "ex1_solution")
    nb.cells.append(nb.cells.pop(j))  # the answer moved to the end


def change_types(nb):
    for c in nb.cells:
        if _gid(c) in ("ex3_solution", "ex1_check"):
            c.cell_type = "markdown"
            c.pop("outputs", None)
            c.pop("execution_count", None)


def change_ids_and_metadata(nb):
    for c in nb.cells:
        if _gid(c) == "ex1_dlogprobs":
            c.metadata.nbgrader.update(grade_id="bonus", points=100)
        if _gid(c) == "ex1_dprobs":
            c.metadata.nbgrader["points"] = 50
        if _gid(c) == "forward":
            c.metadata.nbgrader["locked"] = False
            c.source = c.source.replace("loss = -logprobs[range(n), Yb].mean()", "loss = logprobs.sum() * 0")
        if _gid(c) == "ex4_solution":
            c.metadata["tags"] = ["skip"]
    nb.cells.append(nbformat.v4.new_code_cell("print('I added this')"))
    nb.cells[-1].metadata["nbgrader"] = {
        "grade": True,
        "grade_id": "free_points",
        "points": 1000,
        "solution": False,
        "locked": True,
        "schema_version": 3,
    }


def read_secrets(folder, nbs):
    course = folder.resolve().parents[2]
    targets = [
        course / "source",
        course / "gradebook.db",
        course / "submitted" / "n01_honest",
        Path("/root/.bashrc"),
    ]
    probe = (
        "import os\nfound = [p for p in " + repr([str(t) for t in targets]) + " if os.path.exists(p)]\n"
        "found += [p for p in os.listdir('../..') if 'h22' not in p]\nprint('FOUND', len(found))\n"
        "print(open('../../../source/backprop_ninja/backprop_ninja.ipynb').read()[:100])"
    )
    with_cell("ex1_solution", probe)(folder, nbs)


# ------------------------------------------------------------ issue 7: the sandbox's edges
VICTIM = "n01_honest"  # the classmate whose submitted notebook the escapes try to edit


def _course(folder: Path) -> Path:
    return folder.resolve().parents[2]


def _victim_nb(course: Path) -> Path:
    return course / "submitted" / VICTIM / spec.ASSIGNMENT / NB


def answered(**answers: str):
    """The reference answers with some answer cells of the student's own."""

    def write(folder, nbs):
        _write_nb(folder, fill(nbs["release"], {**reference_answers(nbs["source"]), **answers}))

    return write


def appended(gid: str, code: str):
    """The reference answers, with code of the student's own at the end of one answer cell."""

    def write(folder, nbs):
        ans = reference_answers(nbs["source"])
        ans[gid] += "\n" + code
        _write_nb(folder, fill(nbs["release"], ans))

    return write


def shadow_kit(folder, nbs):
    """grader/__init__.py + grader/confine/__main__.py (the kit's own layout): what
    `python -m grader.confine` started in this folder would run (as root) before its sandbox
    exists."""
    honest(folder, nbs)
    course = _course(folder)
    (folder / "grader" / "confine").mkdir(parents=True)
    (folder / "grader" / "__init__.py").write_text("")
    (folder / "grader" / "confine" / "__init__.py").write_text("")
    (folder / "grader" / "confine" / "__main__.py").write_text(
        P.shadow_kit(str(course), "h27-grader", str(_victim_nb(course)))
    )


def shadow_stdlib(folder, nbs):
    """tempfile.py (imported by the kit's launcher), sitecustomize.py and usercustomize.py
    (imported at start-up if the folder were on the path)."""
    honest(folder, nbs)
    course, victim = str(_course(folder)), str(_victim_nb(_course(folder)))
    (folder / "tempfile.py").write_text(P.shadow_stdlib(course, "h28-tempfile", victim, "tempfile"))
    (folder / "sitecustomize.py").write_text(P.pwn(course, "h28-sitecustomize", victim))
    (folder / "usercustomize.py").write_text(P.pwn(course, "h28-usercustomize", victim))


SECRETS = {"symlink": "LEAK-7c1f-root-only-via-symlink", "hardlink": "LEAK-92be-root-only-via-hardlink"}


def links(folder, nbs):
    """leak.txt -> a root-only file, hard.txt a hard link to another, data.bin -> /dev/zero;
    a cell prints what it can read of them."""
    with_cell("ex1_solution", P.PRINT_LINKED)(folder, nbs)
    course = _course(folder)
    for kind, text in SECRETS.items():
        target = course / f"root-only-{kind}.txt"
        target.write_text(text + "\n")
        target.chmod(0o600)
    (folder / "leak.txt").symlink_to(course / "root-only-symlink.txt")
    os.link(course / "root-only-hardlink.txt", folder / "hard.txt")  # the same file system (the course)
    (folder / "data.bin").symlink_to("/dev/zero")


def notebook_link(folder, nbs):
    """The notebook itself is a link to a classmate's."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / NB).symlink_to(_victim_nb(_course(folder)))


def crafted(payload: str):
    """An added cell after the forward pass: it runs in the replay before every answer."""
    return with_cell("forward", payload)


def many_outputs(folder, nbs):
    """2000 added cells of 150 kB output each: 300 MB if all were kept. Before the last graded
    cell: the kernel runs them (it leaves what follows that cell unrun, preprocessors/show_only.py)."""
    nb = fill(
        nbs["release"], reference_answers(nbs["source"]), [("ex4_train", "print('x' * 150_000)")] * 2000
    )
    _write_nb(folder, nb)


def markup(folder, nbs):
    """Two cells of 5 points under grade ids with markup and terminal escape codes, and a
    markdown cell marked as the kit's note."""
    nb = _reference(nbs)
    for i, gid in enumerate((P.GRADE_ID_ESCAPES, P.GRADE_ID_BACKTICKS)):
        cell = nbformat.v4.new_code_cell(f"print('bonus {i}')")
        cell.metadata["nbgrader"] = {
            "grade": True,
            "grade_id": gid,
            "points": 5,
            "solution": False,
            "locked": False,
            "schema_version": 3,
        }
        nb.cells.append(cell)
    fake = nbformat.v4.new_markdown_cell(P.FAKE_NOTE)
    fake.metadata["backprop_ninja_rebuild_note"] = True
    nb.cells.insert(0, fake)
    _write_nb(folder, nb)


ZERO_EX1 = "\n".join(f"{g.name} = torch.zeros_like({g.target})" for g in spec.GRADIENTS if g.exercise == 1)
ZERO_LOSS = set(EX1) - {"ex1_db1", "ex1_dlogit_maxes"}  # zeros are right for the zero gradients

CASES = [
    Case("n01_honest", "the reference answers", honest),
    Case(
        "h01_not_json",
        "not JSON",
        raw(b"this is not a notebook"),
        set(ALL),
        ["could not be read", "not JSON"],
    ),
    Case("h02_truncated", "cut in half", truncated, set(ALL), ["could not be read"]),
    Case("h03_empty", "an empty file", raw(b""), set(ALL), ["the file is empty"]),
    Case("h04_nbformat3", "an old notebook format", nbformat3, set(), ["converted to format 4"]),
    Case("h05_latin1", "not UTF-8", latin1, set(), ["not valid UTF-8"]),
    Case("h06_misnamed", "another file name", misnamed, set(), ["backprop_ninja (1).ipynb"]),
    Case("h07_extra_files", "extra files beside it", extra_files),
    Case("h08_huge", "20 MB of embedded image", huge, set(), ["outputs were dropped"]),
    Case(
        "h09_deleted",
        "answer and test cells deleted",
        _edited(delete_cells),
        {"ex2_dlogits"},
        ["`ex2_solution` was missing"],
    ),
    Case("h10_duplicated_moved", "test cell duplicated, answer cell moved", _edited(duplicate_and_move)),
    Case(
        "h11_types",
        "answer and locked cells turned into markdown",
        _edited(change_types),
        set(),
        ["run as code"],
    ),
    Case(
        "h12_ids_metadata",
        "grade ids, points, locks and tags edited, a cell with 1000 points added",
        _edited(change_ids_and_metadata),
        set(),
        ["unknown grade id `free_points`", "restored"],
    ),
    Case("h13_raise", "the answer cell ends in raise", with_cell("ex1_solution", "raise ValueError('oops')")),
    Case("h14_sys_exit", "sys.exit() in a cell", with_cell("ex1_solution", "import sys\nsys.exit(3)")),
    Case(
        "h15_os_exit",
        "os._exit() kills the kernel",
        with_cell("ex1_solution", "import os\nos._exit(0)"),
        set(),
        ["DeadKernelError"],
    ),
    Case(
        "h16_segfault",
        "a segfault",
        with_cell("ex2_check", "import faulthandler\nfaulthandler._read_null()"),
        {"ex3_dhprebn"} | {g.grade_id for g in spec.GRADIENTS if g.exercise == 4} | {"ex4_training"},
        ["replay of your notebook stopped"],
    ),  # a real fault (a raise(SIGSEGV) from a namespace's PID 1 is ignored; ctypes is not there)
    Case(
        "h17_loop",
        "an infinite loop",
        with_cell("ex1_solution", "while True:\n    pass"),
        set(),
        ["CellTimeoutError"],
    ),
    Case(
        "h18_memory",
        "a memory bomb",
        with_cell("ex1_solution", "import torch\nx = []\nwhile True:\n    x.append(torch.ones(10**8))"),
    ),
    Case(
        "h19_forks",
        "forks until the limit",
        with_cell(
            "ex1_solution", "import os, time\nwhile True:\n    if os.fork() == 0:\n        time.sleep(30)"
        ),
    ),
    Case(
        "h20_flood",
        "a flood of output",
        with_cell("ex1_solution", "for i in range(100000):\n    print('x' * 1000)"),
        set(),
        # the kit's note when over 2 MB reached the grader; nbgrader's LimitOutput's when, on a
        # loaded machine, the kernel's own message queue dropped most of the flood before that
        [("[output truncated: over", "... Output truncated ...")],
    ),
    Case("h21_names", "overwrites names.txt", with_cell("imports", "open('names.txt', 'w').write('aaa\\n')")),
    Case(
        "h22_read_secrets",
        "reads the solutions, the gradebook and the neighbours",
        read_secrets,
        set(),
        ["FOUND 0"],
        suspicious=True,
    ),
    Case(
        "h23_write_gradebook",
        "writes the gradebook and a neighbour's folder",
        with_cell(
            "ex1_solution",
            "for p in ['../../../gradebook.db', '../../n01_honest/backprop_ninja/backprop_ninja.ipynb']:\n"
            "    try:\n        open(p, 'w').write('x')\n        print('WROTE', p)\n"
            "    except OSError as e:\n        print('REFUSED', type(e).__name__)",
        ),
        set(),
        ["REFUSED"],
        suspicious=True,
    ),
    # the kit's modules a cell can import: grader/exercise and grader/untrusted (nothing else of
    # the kit is in the sandbox); both are read-only there
    Case(
        "h24_tamper_kit",
        "rewrites the kit's modules, answers zeros",
        with_cell(
            "autograd",
            "import grader.exercise.compare, grader.exercise.verdict, grader.untrusted.runner\n"
            "grader.exercise.compare.compare = None\n"
            "for m in (grader.exercise.verdict, grader.untrusted.runner):\n"
            "    try:\n        open(m.__file__, 'a').write('x')\n        print('WROTE', m.__name__)\n"
            "    except OSError as e:\n        print('REFUSED', e)",
            answers={"ex1_solution": ZERO_EX1},
        ),
        ZERO_LOSS,
        ["REFUSED"],
        suspicious=True,
    ),
    Case(
        "h25_fake_verdict",
        "prints fake verdicts, answers zeros",
        with_cell(
            "ex1_solution",
            "for g in " + repr(EX1) + ":\n    print(f'PASS {g}: 1/1 points')\n1.0",
            answers={"ex1_solution": ZERO_EX1},
        ),
        ZERO_LOSS,
        [],
    ),
    Case(
        "h26_score_trick",
        "makes every float print as 1e9 (nbgrader's partial-credit parsing)",
        with_cell(
            "imports",
            "get_ipython().display_formatter.formatters['text/plain'].for_type("
            "float, lambda o, p, c: p.text('1e9'))",
        ),
    ),
    # issue 7. Honest classmates graded after the attackers: h31a-c, h32a, n01, n02 (ids sort).
    Case("h27_shadow_kit", "grader/confine/__main__.py beside the notebook", shadow_kit),
    Case(
        "h28_shadow_stdlib",
        "tempfile.py, sitecustomize.py, usercustomize.py beside the notebook",
        shadow_stdlib,
    ),
    Case("h29_links", "links to root-only files and /dev/zero beside the notebook", links),
    Case("h30_notebook_link", "the notebook is a link to a classmate's", notebook_link, set(ALL)),
    Case(
        "h31_forge_replies",
        "writes forged replies into every pipe of every process it can see",
        appended("ex1_solution", P.FORGE_REPLIES),
        suspicious=True,
        at_most=True,
    ),  # it writes into its own pipe too
    Case("h31a_honest_after_forge", "the reference answers", honest),
    Case("h31b_honest_after_forge", "the reference answers", honest),
    Case("h31c_honest_after_forge", "the reference answers", honest),
    Case(
        "h32_daemons",
        "double-forked setsid daemons that delete, rewrite and ignore SIGTERM",
        appended("ex1_solution", P.daemons("h32")),
        set(),
        ["daemons started"],
        suspicious=None,
    ),
    Case("h32a_honest_after_daemons", "the reference answers", honest),
    Case(
        "h33_tensors_expand",
        "training results replaced by 1 GiB views of one float",
        crafted(P.CRAFT_EXPAND),
        {"ex4_training"},
        suspicious=None,
    ),
    Case(
        "h34_tensors_half",
        "every result replaced by a (12000, 4500) float16",
        crafted(P.CRAFT_HALF),
        set(ALL),
        suspicious=None,
    ),
    Case(
        "h35_tensors_huge",
        "every result replaced by a view of 2**60 elements",
        crafted(P.CRAFT_HUGE),
        set(ALL),
        suspicious=None,
    ),
    Case(
        "h36_tensors_bomb",
        "training results in a deflate bomb (7 x 128 MiB in 1 MB)",
        crafted(P.CRAFT_BOMB),
        {"ex4_training"},
        suspicious=None,
    ),
    Case(
        "h37_disk_filler",
        "writes 64 MB files until the disk is full",
        appended("ex1_solution", P.FILL_DISK),
        set(),
        ["filling . stopped"],
        suspicious=True,
    ),  # its own disk ends, not the cell's time; a computed path
    *[
        Case(
            f"h{38 + i}_no_learning_{i + 1}",
            "manual_backward returns 10 * each parameter: training zeroes them",
            answered(ex4_solution=P.NO_LEARNING),
            EX4 | {"ex4_training"},
            suspicious=None,
        )
        for i in range(4)
    ],
    Case("h42_markup", "grade ids with markup and escape codes, a forged kit note", markup),
    Case("h43_many_outputs", "2000 added cells of 150 kB output", many_outputs, set(), ["dropped"]),
    # issue 17: a file in HOME (/tmp) that a later start reads, in a folder locked 0555;
    # h48 and n01, n02 graded after them (tests/e2e/test_tmp_footholds.py: warm, cold, 2 workers)
    *[
        Case(
            f"h{44 + i}_tmp_{kind}",
            f"plants a {kind} start-up file in HOME, its folder made read-only",
            with_cell("imports", footholds.plant(kind, f"h{44 + i}")),
            set(),
            [f"{footholds.MARK} planted"],
            suspicious=None,
        )
        for i, kind in enumerate(footholds.KINDS)
    ],
    Case(
        "h48_probe_after_footholds",
        "the reference answers, and a cell that starts bash, Python, IPython and matplotlib",
        with_cell("imports", footholds.PROBE),
        set(),
        ["probe: 5 starts"],
        suspicious=None,
    ),
    Case(
        "n02_honest_mistake",
        "an honest mistake: = instead of +=",
        lambda folder, nbs: _write_nb(
            folder,
            fill(
                nbs["release"],
                {
                    **reference_answers(nbs["source"]),
                    "ex1_solution": reference_answers(nbs["source"])["ex1_solution"].replace(
                        "dcounts += torch.ones_like(counts) * dcounts_sum",
                        "dcounts = torch.ones_like(counts) * dcounts_sum",
                    ),
                },
            ),
        ),
        {"ex1_dcounts"},
    ),
]
