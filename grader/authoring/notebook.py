"""The instructor notebook of an exercise, from its definition alone: the text, the locked
setup cells, the forward pass, the autograd cell, one answer cell per exercise with the
student's `cmp` check under it, and one hidden grade cell per gradient (its grade id and points
from the definition). nbgrader's generate_assignment makes the release from it as from any
instructor notebook; the hidden cells call grader.incell.grade_gradient."""

from __future__ import annotations

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from ..exercise.definition import FUNCTION, IMPORTS, Definition, Gradient, InOneGo, Training
from ..exercise.graded import METADATA_KEY, answer_cell, training_cell
from .cmp_cell import cmp_code

AUTOGRADER_STEPS = 100  # the kernel's training run when nbgrader grades: show-only, the replay decides
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
    if d.training is not None:
        cells += _training(d, d.training)
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
    if d.training is not None:
        t = d.training
        rows.append(
            f"| {t.exercise} | `{FUNCTION}`: every parameter's gradient, then train the net with it | "
            f"{len(d.params) + t.points:g} |"
        )
    total = sum(g.points for g in d.gradients()) + (d.training.points if d.training else 0)
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


def _training(d: Definition, t: Training) -> list:
    ex, grads = t.exercise, [g for g in d.gradients() if g.exercise == t.exercise]
    returned = ", ".join(g.name for g in grads)
    text = (
        f"## Exercise {ex}: {t.title or 'train the net with your own backward pass'} "
        f"({len(grads) + t.points:g} points)\n\n"
        + (t.text + "\n\n" if t.text else "")
        + f"Put your backward pass into `{FUNCTION}`: it is handed the forward pass's tensors by name\n"
        "(take the ones you need, or all of them) and returns the gradient of every parameter, in this\n"
        f"order: `[{returned}]`. The loop under it trains the net with it: no `loss.backward()`."
    )
    code = training_answer(d)
    call = f"{FUNCTION}(**{{k: globals()[k] for k in {list(d.backward_arguments)!r}}})"
    check = (
        "# compare with autograd: your gradients of the forward pass above, each against its .grad\n"
        f"ex{ex}_grads = dict(zip({[g.name for g in grads]!r}, {call}))\n"
        + "\n".join(f"cmp({g.target!r}, ex{ex}_grads[{g.name!r}], {g.target})" for g in grads)
    )
    cells = [
        _locked(f"ex{ex}_md", new_markdown_cell(text)),
        _cell(new_code_cell(code), answer_cell(ex), solution=True),
        _locked(f"ex{ex}_check", new_code_cell(check)),
    ]
    cells += [_grade_cell(g, f"ex{ex}_grads.get({g.name!r})") for g in grads]
    cells.append(_locked(training_cell(ex), new_code_cell(_training_loop(d, t, call))))
    return cells + [_training_grade_cell(ex, t.points)]


def training_answer(d: Definition) -> str:
    """The training exercise's answer cell: manual_backward, the exercise-1 solution its body."""
    ex = d.training.exercise
    returned = ", ".join(g.name for g in d.gradients() if g.exercise == ex)
    body = "\n".join("    " + line if line else "" for line in d.solution.strip().splitlines())
    head = f"# Exercise {ex}: your code\ndef {FUNCTION}(\n{_wrapped(d.backward_arguments)}\n):\n"
    stub = "    raise NotImplementedError()\n"
    answer = f"    ### BEGIN SOLUTION\n{body}\n    ### END SOLUTION\n" if body else stub
    return head + answer + f"    return [{returned}]"


def _training_loop(d: Definition, t: Training, call: str) -> str:
    step = (d.batch.code + "\n" if d.batch else "") + d.forward_source()
    return (
        f"# train with your backward pass: no loss.backward()\nlr = {t.learning_rate!r}\n"
        f"max_steps = {t.steps}\nif os.environ.get('NBGRADER_EXECUTION'):\n"
        f"  max_steps = {min(t.steps, AUTOGRADER_STEPS)}  # the autograder's short run: it grades your "
        "backward separately\nlossi = []\n"
        "for i in range(max_steps):\n  with torch.no_grad():\n"
        + "\n".join("    " + line for line in step.splitlines())
        + f"\n    grads = {call}\n    for p, grad in zip([{', '.join(d.params)}], grads):\n"
        "      p.data += -lr * grad\n"
        f"  lossi.append({d.loss}.log10().item())\n"
        "  if i % max(max_steps // 5, 1) == 0 or i == max_steps - 1:\n"
        f"    print(f'{{i:5d}}/{{max_steps}}: {{{d.loss}.item():.4f}}')"
    )


def _wrapped(names, width: int = 92) -> str:
    lines, line = [], "    "
    for n in names:
        if len(line) + len(n) + 2 > width:
            lines.append(line.rstrip())
            line = "    "
        line += n + ", "
    return "\n".join(lines + [line.rstrip()])


def _training_grade_cell(exercise: int, points: float):
    gid = f"ex{exercise}_training"
    code = (
        f"# {gid} ({points:g} point{'s' if points != 1 else ''}): the loss fell while the net trained with "
        f"{FUNCTION}\n### BEGIN HIDDEN TESTS\nfrom grader.incell import grade_training\n"
        f'grade_training("{gid}", globals(), points={points!r})\n### END HIDDEN TESTS'
    )
    return _cell(new_code_cell(code), gid, grade=True, locked=True, points=points)


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
    return _cell(new_code_cell(code), answer_cell(exercise), solution=True)


def _grade_cell(g: Gradient, returned: str | None = None):
    """`returned`: where the training exercise's gradient is (what manual_backward returned)."""
    unit = "point" if g.points == 1 else "points"
    held = f"ex{g.exercise}_grads"
    where = (
        f'assert "{held}" in globals(), "run the exercise {g.exercise} cells: {held} is not defined"'
        if returned
        else f'assert "{g.name}" in globals(), "{g.name} is not defined: write it in the exercise '
        f'{g.exercise} cell and run that cell"'
    )
    ns = f"{{{g.name!r}: {returned}, {g.target!r}: {g.target}}}" if returned else "globals()"
    code = (
        f"# {g.grade_id} ({g.points:g} {unit}): {g.name}, the gradient of the loss w.r.t. {g.target}\n"
        f"{where}\n### BEGIN HIDDEN TESTS\nfrom grader.incell import grade_gradient\n"
        f'grade_gradient("{g.grade_id}", {ns}, points={g.points!r})\n### END HIDDEN TESTS'
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
