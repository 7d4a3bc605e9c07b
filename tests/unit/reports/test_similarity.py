"""Copying is visible: a copied pair (renamed helpers, reordered independent lines, other
comments and spacing) is listed with its evidence; the lecture's own solution, written by
two students, is not evidence; two honest non-lecture solutions are not a pair; a broken
notebook is skipped with a note."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from grader.exercise import spec
from grader.incoming.submissions import Sample, write_submissions
from grader.reports import similarity
from grader.reports.similarity import main, similar_pairs

from corpus import ONEHOT_EX1, OWN_CONSTANTS, VECTORISED_EX1, VECTORISED_EX4

ROOT = Path(__file__).resolve().parents[3]
NB = Path(spec.ASSIGNMENT) / f"{spec.NOTEBOOK}.ipynb"

# A non-lecture exercise 1 with helpers of its own (scale, winner, pick, tanh_slope, flat).
ORIGINAL_EX1 = """
# backward through the net, my way
scale = 1.0 / n
dlogprobs = torch.zeros_like(logprobs)
dlogprobs[range(n), Yb] = -scale
dprobs = dlogprobs / probs
dcounts_sum_inv = (counts * dprobs).sum(1, keepdim=True)
dcounts_sum = -dcounts_sum_inv / counts_sum**2
dcounts = counts_sum_inv * dprobs + dcounts_sum
dnorm_logits = norm_logits.exp() * dcounts
dlogit_maxes = -dnorm_logits.sum(1, keepdim=True)
winner = logits.argmax(1)
pick = F.one_hot(winner, logits.shape[1]).float()
dlogits = dnorm_logits + pick * dlogit_maxes
dh = dlogits @ W2.T
dW2 = h.T @ dlogits
db2 = dlogits.sum(0)
tanh_slope = 1.0 - h * h
dhpreact = tanh_slope * dh
dbngain = (dhpreact * bnraw).sum(0, keepdim=True)
dbnbias = dhpreact.sum(0, keepdim=True)
dbnraw = dhpreact * bngain
dbnvar_inv = (dbnraw * bndiff).sum(0, keepdim=True)
dbndiff = dbnraw * bnvar_inv
dbnvar = dbnvar_inv * -0.5 * bnvar_inv**3
dbndiff2 = dbnvar.expand_as(bndiff2) / (n - 1)
dbndiff = dbndiff + dbndiff2 * 2 * bndiff
dbnmeani = -dbndiff.sum(0, keepdim=True)
dhprebn = dbndiff + dbnmeani.expand_as(hprebn) * scale
dembcat = dhprebn @ W1.T
dW1 = embcat.T @ dhprebn
db1 = dhprebn.sum(0)
demb = dembcat.view(emb.shape)
flat = Xb.reshape(-1)
dC = torch.zeros_like(C)
dC.index_add_(0, flat, demb.reshape(flat.shape[0], -1))
"""

# The same, copied: helpers renamed (scale->k_inv, winner->amax, pick->mask, tanh_slope->dtanh,
# flat->idx), independent lines reordered (dW2/db2/dh, dbngain/dbnbias, dbndiff/dbnvar_inv,
# idx/dC), comments and spacing changed.
COPIED_EX1 = """
k_inv = 1./n   # 1/batch
dlogprobs = torch.zeros_like(logprobs)
dlogprobs[range(n), Yb] = -k_inv
dprobs = dlogprobs/probs
dcounts_sum_inv = (counts*dprobs).sum(1, keepdim = True)
dcounts_sum = -dcounts_sum_inv/counts_sum**2
dcounts = counts_sum_inv*dprobs + dcounts_sum

dnorm_logits = norm_logits.exp()*dcounts
dlogit_maxes = -dnorm_logits.sum(1, keepdim=True)
amax = logits.argmax(1)
mask = F.one_hot(amax, logits.shape[1]).float()   # where the max was
dlogits = dnorm_logits + mask*dlogit_maxes
db2 = dlogits.sum(0)
dW2 = h.T@dlogits
dh = dlogits@W2.T
dtanh = 1.0 - h*h
dhpreact = dtanh*dh
dbnbias = dhpreact.sum(0, keepdim=True)
dbngain = (dhpreact*bnraw).sum(0, keepdim=True)
dbnraw = dhpreact*bngain
dbndiff = dbnraw*bnvar_inv
dbnvar_inv = (dbnraw*bndiff).sum(0, keepdim=True)
dbnvar = dbnvar_inv*-0.5*bnvar_inv**3
dbndiff2 = dbnvar.expand_as(bndiff2)/(n - 1)
dbndiff = dbndiff + dbndiff2*2*bndiff
dbnmeani = -dbndiff.sum(0, keepdim=True)
dhprebn = dbndiff + dbnmeani.expand_as(hprebn)*k_inv
dembcat = dhprebn@W1.T
dW1 = embcat.T@dhprebn
db1 = dhprebn.sum(0)
demb = dembcat.view(emb.shape)
dC = torch.zeros_like(C)
idx = Xb.reshape(-1)
dC.index_add_(0, idx, demb.reshape(idx.shape[0], -1))
"""


@pytest.fixture
def course(tmp_path) -> Path:
    for stage in ("source", "release"):
        (tmp_path / stage / NB).parent.mkdir(parents=True)
        shutil.copy(ROOT / stage / NB, tmp_path / stage / NB)
    return tmp_path


def lecture_with_comments(student: str, comments: list[tuple[str, str]]) -> Sample:
    """The reference answers exactly, with comments (and spacing) of the student's own."""
    return Sample(student, "the lecture's solution", edits={"ex1_solution": comments})


def test_copied_pair_is_listed_with_evidence(course):
    write_submissions(
        [
            Sample("orig", "own solution", replace={"ex1_solution": ORIGINAL_EX1}),
            Sample("copier", "copied it", replace={"ex1_solution": COPIED_EX1}),
            Sample("lecture", "the lecture's solutions"),
            Sample("other", "another style", replace={"ex1_solution": VECTORISED_EX1}),
        ],
        course=course,
    )
    found = similar_pairs(course)
    assert [sorted(f.students) for f in found] == [["copier", "orig"]]
    f = found[0]
    assert f.kind == "similar" and f.grade_ids == ["ex1_solution"]
    first, second = f.students
    assert f"{first} ex1_solution ~ {second} ex1_solution" in f.evidence
    # renaming and reordering fully undone (without the canonical order 75%, without renaming 61%)
    assert f.evidence.startswith("similarity 100%: "), f.evidence
    # the side by side shows a renamed helper's line against its original
    rows = [l.split(" | ") for l in f.evidence.splitlines() if " | " in l and "ex1_solution:" in l]
    pairs = {(a.split(None, 1)[1].strip(), b.split(None, 1)[1].strip()) for a, b in rows}
    copied = {p if first == "orig" else p[::-1] for p in pairs}
    assert ("scale = 1.0 / n", "k_inv = 1./n   # 1/batch") in copied, f.evidence


def test_the_lecture_solution_twice_is_not_a_pair(course, monkeypatch):
    write_submissions(
        [
            lecture_with_comments(
                "ann", [("dh = dlogits @ W2.T", "dh = dlogits @ W2.T  # back through layer 2")]
            ),
            lecture_with_comments(
                "bob",
                [("dhpreact = (1.0 - h**2) * dh", "# tanh' = 1 - tanh^2\ndhpreact = (1.0 - h ** 2)*dh")],
            ),
        ],
        course=course,
    )
    assert similar_pairs(course) == []
    # what keeps them apart is the base (the reference solution), not a lack of likeness
    reference = similarity._reference
    monkeypatch.setattr(similarity, "_reference", lambda c, e: (reference(c, e)[0], set()))
    assert [sorted(f.students) for f in similar_pairs(course)] == [["ann", "bob"]]


def test_two_honest_non_lecture_solutions_are_not_a_pair(course):
    write_submissions(
        [
            Sample(
                "vec", "vectorised", replace={"ex1_solution": VECTORISED_EX1, "ex4_solution": VECTORISED_EX4}
            ),
            Sample(
                "hot",
                "one-hot",
                replace={"ex1_solution": ONEHOT_EX1},
                added=[("autograd", OWN_CONSTANTS)],
            ),
            Sample("own", "own solution", replace={"ex1_solution": ORIGINAL_EX1}),
        ],
        course=course,
    )
    notes = []
    assert similar_pairs(course, notes=notes) == []
    assert notes == []
    # two of them do share lines of their own (the same dcounts and dlogit_maxes), a small part
    shared = {tuple(f.students): f.evidence for f in similar_pairs(course, threshold=0)}
    assert list(shared) == [("own", "vec")]
    assert int(shared["own", "vec"].split("%")[0].split()[-1]) < 30, shared


def test_a_broken_notebook_is_skipped_with_a_note(course, capsys):
    write_submissions(
        [
            Sample("orig", "own solution", replace={"ex1_solution": ORIGINAL_EX1}),
            Sample("copier", "copied it", replace={"ex1_solution": COPIED_EX1}),
            Sample("odd", "a cell source made a number"),
        ],
        course=course,
    )
    odd = course / "submitted" / "odd" / NB
    nb = json.loads(odd.read_text())
    nb["cells"][3]["source"] = 42
    odd.write_text(json.dumps(nb))
    (course / "submitted" / "torn" / NB).parent.mkdir(parents=True)
    (course / "submitted" / "torn" / NB).write_text('{"cells": [')
    notes = []
    found = similar_pairs(course, notes=notes)
    assert [sorted(f.students) for f in found] == [["copier", "orig"]]  # the others still compared
    assert [str(n) for n in notes] == [
        "odd: skipped, cell 3 has no text as its source",
        "torn: skipped, unreadable notebook (JSONDecodeError)",
    ]
    assert {n.kind for n in notes} == {"unreadable"}
    assert main([str(course)]) == 0
    out = capsys.readouterr().out
    assert "note: torn: skipped" in out and "copier: similar to 1 other(s)" in out
    assert "orig: similar to 1 other(s)" in out


def test_added_cells_are_compared_and_locked_cells_are_not(course):
    write_submissions(
        [
            Sample("pia", "own code in a cell of her own", added=[("autograd", ORIGINAL_EX1)]),
            Sample("quin", "copied it into a cell of his own", added=[("autograd", COPIED_EX1)]),
            Sample("rae", "own code written into a locked cell"),
            Sample("sam", "the same, copied, in a locked cell"),
        ],
        course=course,
    )
    for student, code in (("rae", ORIGINAL_EX1), ("sam", COPIED_EX1)):
        path = course / "submitted" / student / NB
        nb = json.loads(path.read_text())
        locked = next(c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == "batch")
        locked["source"] = "".join(locked["source"]) + "\n" + code
        path.write_text(json.dumps(nb))
    found = similar_pairs(course)
    assert [f.students for f in found] == [("pia", "quin")]
    assert found[0].grade_ids == []  # no answer cell involved
    assert "pia cell " in found[0].evidence and "(added) ~ quin cell " in found[0].evidence


def test_a_written_exercises_copied_answers_are_a_pair(tmp_path):
    """The GPT block's class: two students with the same answer in a style of their own are a
    pair, found in its own notebooks (gpt_block/gpt_block.ipynb); the instructor's answer twice is not."""
    import nbformat

    from grader.authoring.notebook import instructor_notebook
    from grader.exercise.definitions.gpt_block import GPT_BLOCK as GPT

    from gpt_corpus import WRITTEN

    nb = instructor_notebook(GPT)
    (tmp_path / "source" / "gpt_block").mkdir(parents=True)
    nbformat.write(nb, tmp_path / "source" / "gpt_block" / "gpt_block.ipynb")
    own = GPT.solution.replace(".flatten(0, 1)", ".reshape(B*T, -1)").replace(
        ".sum((0, 1))", ".sum(0).sum(0)"
    )
    for student, answer in (("ann", own), ("bob", own), ("cy", GPT.solution), ("dee", GPT.solution)):
        mine = nbformat.from_dict(nb)
        next(c for c in mine.cells if c.metadata["nbgrader"]["grade_id"] == "ex1_solution").source = answer
        (tmp_path / "submitted" / student / "gpt_block").mkdir(parents=True)
        nbformat.write(mine, tmp_path / "submitted" / student / "gpt_block" / "gpt_block.ipynb")
    (found,) = similar_pairs(tmp_path, exercise=WRITTEN)
    assert found.students == ("ann", "bob") and found.grade_ids == ["ex1_solution"]  # not cy with dee


def test_the_base_tokenises_each_distinct_text_once(course, monkeypatch):
    """A cell without a solution reads the same in the release: the base's fingerprints are those
    of every text, each text tokenised once."""
    cells = json.loads((course / "source" / NB).read_text())["cells"]
    sources = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    released = [similarity._SOLUTION.sub(r"\1raise NotImplementedError()", s) for s in sources]
    seen = []
    tokens = similarity.tokens
    monkeypatch.setattr(similarity, "tokens", lambda text, fixed: seen.append(text) or tokens(text, fixed))
    fixed, base = similarity._reference(course, spec.NINJA)
    assert sorted(seen) == sorted(set(sources + released)) and len(seen) < len(sources + released)
    each = {h for text in sources + released for h in similarity._hashes(tokens(text, fixed)[0])}
    assert base == each
