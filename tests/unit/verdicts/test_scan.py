"""grader/verdicts/scan.py: the static scan flags autograd and dynamic tricks, and leaves the lecture's
honest solutions alone (a flag lists a submission for a TA, so false alarms cost time)."""

from __future__ import annotations

import nbformat
import pytest

from grader.exercise import spec
from grader.incoming.submissions import reference_answers
from grader.verdicts.scan import scan_source

from conftest import ROOT
from corpus import ONEHOT_EX1, OWN_CONSTANTS, VECTORISED_EX1, VECTORISED_EX4

SOURCE_NB = ROOT / "source" / spec.ASSIGNMENT / f"{spec.NOTEBOOK}.ipynb"

CHEATS = [
    ("dW1 = W1.grad", "reads .grad"),
    ("loss.backward()", "calls .backward()"),
    ("t.retain_grad()", "calls .retain_grad()"),
    ("p.requires_grad = True", "sets requires_grad"),
    ("gs = torch.autograd.grad(loss, [W1])", "uses torch.autograd"),
    ("from torch.autograd import grad", "imports torch.autograd"),
    ("with torch.enable_grad():\n    pass", "uses torch.enable_grad"),
    ("torch.set_grad_enabled(True)", "uses torch.set_grad_enabled"),
    ("dW1 = torch.func.grad(f)(W1)", "uses torch.func"),
    ("import functorch", "imports functorch"),
    ('dW1 = getattr(W1, "gr" + "ad")', "calls getattr() with a computed name"),
    ('dW1 = getattr(W1, "grad")', "reads .grad"),
    ('exec("dW1 = W1.gr" + "ad")', "calls exec()"),
    ('dW1 = eval("W1")', "calls eval()"),
    ('os = __import__("os")', "calls __import__()"),
    ("import importlib", "imports importlib"),
    ('secret = open("/etc/passwd").read()', "opens a file outside the submission folder"),
    ('open("../../../source/x.ipynb")', "opens a file outside the submission folder"),
    ("open(path)", "opens a file outside the submission folder"),
    ('open("answers.txt")', "opens a file"),
    ('answers = torch.load("answers.pt")', "loads a file"),
    ("globals().update(answers)", "touches globals()"),
    ("torch.allclose = lambda *a: True", "replaces torch.allclose"),
    ("torch.arange = lambda *a: None", "replaces torch.arange"),
    ("setattr(torch, 'arange', f)", "replaces torch.arange"),
    ("torch.__dict__['arange'] = f", "replaces torch.arange"),
    ("vars(torch)['arange'] = f", "replaces torch.arange"),
    ("del torch.arange", "deletes torch.arange"),
    ("torch.nn.functional.cross_entropy = f", "replaces torch.nn.functional.cross_entropy"),
    ("sys.modules['torch'] = fake", "replaces sys.modules"),
    # .grad whose value can reach an answer
    ("dW1.copy_(W1.grad)", "reads .grad"),
    ("torch.save(W1.grad, 'answers.pt')", "reads .grad"),
    ("if (dW1 := W1.grad) is not None:\n    pass", "reads .grad"),
    ("grads = [p.grad for p in parameters]", "reads .grad"),
    ("print(dW1 := W1.grad)", "reads .grad"),
    ("W1.grad += 1", "sets .grad"),
    ("print = list.append; print(grads, W1.grad)", "reads .grad"),  # not the real print
]


@pytest.mark.parametrize("source,what", CHEATS, ids=[c[0][:40] for c in CHEATS])
def test_flags(source, what):
    found = scan_source("ex1_solution", source)
    assert any(what == f.what for f in found), [f.what for f in found]
    assert all(f.cell == "ex1_solution" and f.line == 1 for f in found)


def test_flags_inside_an_honest_answer():
    honest = VECTORISED_EX1.strip("\n").split("\n")
    source = "\n".join(honest[:3] + ["dprobs = probs.grad.clone()"] + honest[3:])
    found = scan_source("ex1_solution", source)
    assert [(f.line, f.what) for f in found] == [(4, "reads .grad")]


def test_honest_reference_answers_are_not_flagged():
    answers = reference_answers(nbformat.read(SOURCE_NB, 4))
    assert set(answers) == set(spec.ANSWER_CELLS.values())
    for gid, source in answers.items():
        assert source.strip(), gid
        assert scan_source(gid, source) == [], gid


@pytest.mark.parametrize(
    "source",
    [VECTORISED_EX1, ONEHOT_EX1, OWN_CONSTANTS, VECTORISED_EX4],
    ids=["vectorised_ex1", "onehot_ex1", "own_constants", "vectorised_ex4"],
)
def test_corpus_honest_answers_are_not_flagged(source):
    assert scan_source("ex1_solution", source) == []


def test_magics_do_not_break_parsing():
    assert scan_source("c", "%time x = 1\ny = 2\n!ls") == []
    found = scan_source("c", "%time x = 1\ny = x.grad")
    assert [(f.line, f.what) for f in found] == [(2, "reads .grad")]
    assert scan_source("c", "%%bash\nx = W1.grad") == []  # a cell magic whose body is not Python
    assert [(f.line, f.what) for f in scan_source("c", "%%time\nx = W1.grad")] == [(2, "reads .grad")]


def test_a_syntax_error_is_one_finding():
    found = scan_source(
        "ex2_solution", "dlogits = F.softmax(logits, 1)\nx = W1.grad\ndlogits[range(n), Yb -= 1"
    )
    assert len(found) == 1
    assert found[0].what == "does not parse"
    assert found[0].line == 3 and found[0].cell == "ex2_solution"


def test_findings_carry_line_numbers_and_code():
    source = "a = 1\n\nb = t.grad\n# comment\nloss.backward()\nimport importlib\n"
    found = scan_source("ex3_solution", source)
    assert [(f.line, f.what) for f in found] == [
        (3, "reads .grad"),
        (5, "calls .backward()"),
        (6, "imports importlib"),
    ]
    assert [f.code for f in found] == ["b = t.grad", "loss.backward()", "import importlib"]
    assert found[0].text() == "ex3_solution, line 3: reads .grad: b = t.grad"


def test_what_is_suspicious_depends_on_where():
    """Autograd, a file of its own and globals() are normal in a student's checking cell,
    suspicious in an answer cell; tampering and paths outside the folder are suspicious anywhere."""
    mine = "your cell after forward"
    for source in ("dW1 = W1.grad", "words = open('names.txt').read()", "print(globals().keys())"):
        assert not any(f.serious for f in scan_source(mine, source)), source
        assert scan_source("ex1_solution", source), source
        assert all(f.serious for f in scan_source("ex1_solution", source)), source
    for source in ("import ctypes", "torch.allclose = None", "open('../../../gradebook.db')", "exec('x=1')"):
        assert any(f.serious for f in scan_source(mine, source)), source


HONEST = {
    "comment": "# dW1 must match W1.grad after loss.backward()\ndW1 = embcat.T @ dhprebn  # not W1.grad",
    "strings": 'print("compare with W1.grad, from loss.backward()")\n"""no .grad, no backward() here"""',
    "no_grad": "with torch.no_grad():\n    dlogits = F.softmax(logits, 1)\n    dlogits[range(n), Yb] -= 1",
    "detach": "probs = F.softmax(logits.detach(), 1)\nx = hpreact.detach().clone()",
    "arange_index": "sm = F.softmax(logits, 1)\nsm[torch.arange(n), Yb] -= 1\ndlogits = sm / n",
    "arange_index_np": "dlogits = probs.clone()\ndlogits[np.arange(n), Yb.numpy()] += -1\ndlogits /= n",
    "shown": "print(W1.grad)\nprint((dW1 - W1.grad).abs().max())\ncmp('W1', dW1, W1)",
    "asserted": "assert torch.allclose(dW1, W1.grad)\nassert W1.grad is not None, W1.grad.shape",
    "tested": "if W1.grad is not None:\n    print('ok')\nwhile W1.grad is None:\n    break",
    "cell_output": "(dW1 - W1.grad).abs().max().item()\ntorch.allclose(dW1, W1.grad)",
    "cleared": "for p in parameters:\n    p.grad = None\ndel W1.grad",
    "setattr_own": "class Box:\n    pass\nbox = Box()\nsetattr(box, 'w', 1)",
}


@pytest.mark.parametrize("source", HONEST.values(), ids=HONEST.keys())
def test_honest_patterns_are_not_flagged(source):
    """What a line does counts, not the words in it: no finding at all, in an answer cell."""
    found = [f for f in scan_source("ex2_solution", source) if f.what != "calls setattr()"]
    assert found == [], [f.text() for f in found]


def test_setattr_on_an_own_object_is_only_dynamic():
    found = scan_source("ex1_solution", "setattr(box, 'w', 1)")
    assert [(f.what, f.kind) for f in found] == [("calls setattr()", "dynamic")]


def test_kinds_for_the_tas():
    kinds = {
        "dW1 = W1.grad": "autograd",
        "torch.arange = f": "tampering",
        "x = sys._getframe(1)": "introspection",
        "x = torch.load('a.pt')": "file",
        "globals().update(a)": "dynamic",
        "x = (": "unparsable",
    }
    for source, kind in kinds.items():
        found = scan_source("ex1_solution", source)
        assert kind in {f.kind for f in found}, (source, [(f.what, f.kind) for f in found])


def test_a_grad_function_is_flagged_by_its_module_not_as_a_read():
    found = scan_source("ex1_solution", "gr = torch.autograd.grad(loss, ps)")
    assert [f.what for f in found] == ["uses torch.autograd"]
