"""The instructor notebook of an exercise, from its definition alone: the text, the locked
setup cells, the forward pass, the autograd cell, one answer cell per exercise with the
student's `cmp` check under it, and one hidden grade cell per gradient (its grade id and points
from the definition). nbgrader's generate_assignment makes the release from it as from any
instructor notebook; the hidden cells call grader.incell.grade_gradient."""

from __future__ import annotations

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from ..exercise.definition import IMPORTS, Definition, Gradient, InOneGo
from ..exercise.graded import METADATA_KEY
from .cmp_cell import cmp_code

HOW_TO_WORK = (
    "How to work: write your code only in the cells marked `# YOUR CODE HERE` (replace the\n"
    "`raise NotImplementedError()` line). Every other cell is locked. After each exercise, run the\n"
    "comparison cell under it: it compares your tensors with the ones PyTorch's autograd computes."
)


def instructor_notebook(d: Definition) -> nbformat.NotebookNode:
    if not d.setup:
        raise ValueError(f"{d.name}: no setup cells, so the notebook could not define its tensors")
    cells = [_locked("intro", new_markdown_cell(_intro(d))), _locked("imports", new_code_cell(IMPORTS))]
    for c in d.setup:
        if c.text:
            cells.append(_locked(f"{c.grade_id}_md", new_markdown_cell(c.text)))
        cells.append(_locked(c.grade_id, new_code_cell(c.code)))
    cells += [
        _locked("cmp", new_code_cell(cmp_code(d))),
        _locked("forward_md", new_markdown_cell(_FORWARD_MD)),
        _locked(
            "forward", new_code_cell('# forward pass, "chunkated" into small steps\n' + d.forward_source())
        ),
        _locked("autograd", new_code_cell(_autograd(d))),
    ]
    cells += _exercise_1(d)
    for g in d.in_one_go:
        cells += _in_one_go(d, g)
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {
        "display_name": "Python 3 (ipykernel)",
        "language": "python",
        "name": "python3",
    }
    nb.metadata["language_info"] = {"name": "python"}
    nb.metadata[METADATA_KEY] = {"definition": d.to_json()}  # what the judge grades it by: no solution
    return nb


_FORWARD_MD = (
    '## The forward pass, "chunkated"\n\nThe forward pass is split into small steps so that each '
    "can be backpropagated on its own. The next cell also lets PyTorch compute every gradient, the "
    "answers `cmp` compares yours with."
)


def _intro(d: Definition) -> str:
    ex1 = [g for g in d.gradients() if g.exercise == 1]
    rows = [
        f"| 1 | the gradient of every tensor of the forward pass, one by one ({len(ex1)} tensors) | "
        f"{sum(g.points for g in ex1):g} |"
    ]
    rows += [
        f"| {g.exercise} | `d{g.target}` {_from(d, g)}, in one formula | {g.points:g} |" for g in d.in_one_go
    ]
    total = sum(g.points for g in d.gradients())
    table = "| exercise | what you write | points |\n|---|---|---|\n" + "\n".join(rows)
    return (
        f"# {d.title or d.name}\n\n{d.intro}\n\n{table}\n\nTotal: {total:g} points.\n\n{HOW_TO_WORK}".replace(
            "\n\n\n", "\n\n"
        )
    )


def _from(d: Definition, g: InOneGo) -> str:
    return "from the loss" if g.start == d.loss else f"from `d{g.start}`"


def _autograd(d: Definition) -> str:
    kept = ", ".join(s.name for s in d.steps if s.name != d.loss)
    return (
        "# PyTorch's backward pass: fills t.grad, the answers you compare with\n"
        f"for p in [{', '.join(d.params)}]:\n  p.grad = None\n"
        f"for t in [{kept}]:\n  t.retain_grad()\n"
        f"{d.loss}.backward()\n{d.loss}"
    )


def _exercise_1(d: Definition) -> list:
    ex1 = [g for g in d.gradients() if g.exercise == 1]
    twice = [
        f"`{x}` feeds {' and '.join(f'`{c}`' for c in d.consumers(x))}"
        for x in d.backward_order()
        if len(d.consumers(x)) > 1
    ]
    text = (
        f"## Exercise 1: backprop through the whole thing, one tensor at a time "
        f"({sum(g.points for g in ex1):g} points)\n\n"
        "Write the gradient of the loss with respect to every tensor of the forward pass, in the\n"
        "backward order, each under its own name: `dX` for `X`, with the shape of `X`. Go backwards\n"
        "one line of the forward pass at a time: the gradient of an input is the local derivative\n"
        "times the gradient that arrives from the output.\n\n"
        + (
            f"A tensor used twice gets gradients from both uses: add them ({'; '.join(twice)}).\n\n"
            if twice
            else ""
        )
        + "Tensors, in order: "
        + ", ".join(f"`{g.name}`" for g in ex1)
        + "."
    )
    cells = [_locked("ex1_md", new_markdown_cell(text)), _answer(1, d.solution)]
    cells.append(_locked("ex1_check", new_code_cell(_checks(ex1))))
    return cells + [_grade_cell(g) for g in ex1]


def _in_one_go(d: Definition, g: InOneGo) -> list:
    grad = next(x for x in d.gradients() if x.exercise == g.exercise)
    lines = "\n".join(f"{s.name} = {s.expr}" for s in d.segment(g))
    text = (
        f"## Exercise {g.exercise}: {g.title or 'd' + g.target + ' in one go'} ({g.points:g} points)\n\n"
        + (g.text + "\n\n" if g.text else "")
        + f"Write `d{g.target}` {_from(d, g)} in one formula, without the intermediate gradients of "
        f"these steps:\n\n```python\n{lines}\n```"
    )
    return [
        _locked(f"ex{g.exercise}_md", new_markdown_cell(text)),
        _answer(g.exercise, g.solution),
        _locked(f"ex{g.exercise}_check", new_code_cell(_checks([grad]))),
        _grade_cell(grad),
    ]


def _checks(gradients: list[Gradient]) -> str:
    return "# compare with autograd: run this after your cell above\n" + "\n".join(
        f"cmp({g.target!r}, {g.name}, {g.target})" for g in gradients
    )


def _answer(exercise: int, solution: str):
    code = f"# Exercise {exercise}: your code\n" + (
        f"### BEGIN SOLUTION\n{solution.strip()}\n### END SOLUTION"
        if solution
        else "raise NotImplementedError()"
    )
    return _cell(new_code_cell(code), f"ex{exercise}_solution", solution=True)


def _grade_cell(g: Gradient):
    unit = "point" if g.points == 1 else "points"
    code = (
        f"# {g.grade_id} ({g.points:g} {unit}): {g.name}, the gradient of the loss w.r.t. {g.target}\n"
        f'assert "{g.name}" in globals(), "{g.name} is not defined: write it in the exercise '
        f'{g.exercise} cell and run that cell"\n'
        "### BEGIN HIDDEN TESTS\nfrom grader.incell import grade_gradient\n"
        f'grade_gradient("{g.grade_id}", globals(), points={g.points!r})\n### END HIDDEN TESTS'
    )
    return _cell(new_code_cell(code), g.grade_id, grade=True, locked=True, points=g.points)


def _locked(grade_id: str, cell):
    return _cell(cell, grade_id, locked=True)


def _cell(cell, grade_id: str, *, solution=False, grade=False, locked=False, points=None):
    meta = {
        "grade": grade,
        "grade_id": grade_id,
        "locked": locked,
        "schema_version": 3,
        "solution": solution,
        "task": False,
    }
    if points is not None:
        meta["points"] = points
    cell.metadata["nbgrader"] = meta
    cell.id = grade_id.replace(".", "-")  # the same notebook every time it is written
    return cell
