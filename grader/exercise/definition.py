"""A backprop exercise defined by its forward pass alone (issue 21): the instructor writes the
steps, each an ordinary torch expression of earlier names, as the lecture "chunkates" its
forward pass; the rest derives from them here: what each step reads (its inputs, in the order
the expression names them), who reads each tensor (its consumers: one branch of its gradient
each), the order a student backpropagates in, and the graded gradients with their grade ids.

The definitions themselves live in grader/exercise/definitions/, one module an exercise. This
folder is visible inside the sandbox: a definition holds the forward pass students see, never a
backward rule (the references are autograd's, in the judge's process).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from functools import cached_property

# The imports cell of a written exercise's notebook: what every setup cell and step may use.
IMPORTS = "import os\n\nimport torch\nimport torch.nn.functional as F"


@dataclass(frozen=True)
class Step:
    """`name = expr`, one line of the chunked forward pass; `note` is its comment in the cell."""

    name: str
    expr: str
    note: str = ""

    def names_read(self) -> list[str]:
        """Every name the expression reads, in the order it first reads them."""
        seen: list[str] = []
        for node in ast.walk(ast.parse(self.expr, mode="eval")):
            if isinstance(node, ast.Name) and node.id not in seen:
                seen.append(node.id)
        return sorted(seen, key=lambda n: _first_column(self.expr, n))


def _first_column(expr: str, name: str) -> int:
    tree = ast.parse(expr, mode="eval")
    return min(n.col_offset for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == name)


@dataclass(frozen=True)
class GradedCell:
    """A graded cell of an exercise; its grade id (a public interface) is ex<exercise>_<name>."""

    exercise: int
    name: str

    @property
    def grade_id(self) -> str:
        return f"ex{self.exercise}_{self.name}"


@dataclass(frozen=True)
class Gradient(GradedCell):
    """A graded gradient: `name` the student's variable (dX), `target` the tensor X."""

    target: str
    points: float


@dataclass(frozen=True)
class InOneGo:
    """An exercise that asks one gradient in one formula ("in one go"), from the gradient of
    `start` (the loss itself when it is the loss) through the steps in between. `title` and
    `text` head its section of the notebook; `solution` is the instructor's answer."""

    exercise: int
    target: str
    start: str
    points: float
    title: str = ""
    text: str = ""
    solution: str = ""


# The training exercise's function: the notebook's loop calls it, the replay calls it.
FUNCTION = "manual_backward"


@dataclass(frozen=True)
class Training:
    """An exercise of the lecture's exercise 4's kind: the student's backward pass as a function,
    `manual_backward`, handed the forward pass's tensors by name (those it takes), returning
    the gradient of each parameter in the definition's order; the net trains with it, without
    loss.backward(). A point a parameter's gradient, `points` for the training; `steps`: the
    notebook's loop (the replay runs its own, JudgeSettings.train_steps)."""

    exercise: int
    learning_rate: float
    steps: int = 500
    points: float = 1.0
    title: str = ""
    text: str = ""


@dataclass(frozen=True)
class Cell:
    """A locked setup cell of the notebook (the data, the sizes, the parameters, the batch),
    with the text shown above it."""

    grade_id: str
    code: str
    text: str = ""


@dataclass(frozen=True)
class Definition:
    """An exercise: its parameters (leaves with a gradient), its data (leaves without one: the
    batch), its constants (sizes the expressions read, such as n), and its forward steps in
    order, the last one the loss. `asked`: exercise 1's tensors (default: every intermediate
    and parameter, in backward order); `points`: per tensor (default 1); `in_one_go`: the
    exercises after exercise 1.

    What the notebook needs besides (grader/authoring/ writes it): `setup`, the locked cells
    that define every parameter, data and constant name (parameters with requires_grad); the
    `title` and `intro`; `solution`, the instructor's answer to exercise 1; `files`, what the
    setup reads from beside the notebook (names.txt)."""

    name: str
    params: tuple[str, ...]
    data: tuple[str, ...]
    constants: tuple[str, ...]
    steps: tuple[Step, ...]
    asked: tuple[str, ...] | None = None
    points: dict[str, float] = field(default_factory=dict)
    in_one_go: tuple[InOneGo, ...] = ()
    training: Training | None = None
    setup: tuple[Cell, ...] = ()
    title: str = ""
    intro: str = ""
    solution: str = ""
    files: tuple[str, ...] = ()
    # gradients that are mathematically zero, with why: autograd returns float noise, zeros are right
    zero_gradients: dict[str, str] = field(default_factory=dict)
    seed: int = 2147483647  # the setup's seed, which the replay changes per student (the lecture's)

    def __post_init__(self):
        for g in self.in_one_go:
            if g.start != self.loss and g.start not in self.inputs:
                raise ValueError(f"{self.name}: exercise {g.exercise} starts from {g.start!r}, not a step")
            if not self.only_through(g.target, g.start):
                raise ValueError(
                    f"{self.name}: exercise {g.exercise}: {g.target!r} reaches the loss other than "
                    f"through {g.start!r}, so its gradient is not d{g.start} pulled back"
                )

    def only_through(self, name: str, start: str) -> bool:
        """Whether every path from `name` to the loss passes through `start`."""
        todo = list(self.consumers(name))
        while todo:
            c = todo.pop()
            if c == start:
                continue
            if c == self.loss:
                return False
            todo.extend(self.consumers(c))
        return True

    def segment(self, g: InOneGo) -> list[Step]:
        """The steps an in-one-go exercise backpropagates through: from its target to its start."""
        between, todo = set(), list(self.consumers(g.target))
        while todo:
            c = todo.pop()
            if c not in between:
                between.add(c)
                if c != g.start:
                    todo.extend(self.consumers(c))
        return [s for s in self.steps if s.name in between]

    @property
    def batch(self) -> Cell | None:
        """The setup cell named `batch`, which draws a batch: the replay may resize it, and a
        training loop runs it again each step."""
        return next((c for c in self.setup if c.grade_id == "batch"), None)

    @property
    def loss(self) -> str:
        return self.steps[-1].name

    @cached_property
    def inputs(self) -> dict[str, tuple[str, ...]]:
        """Step -> the tensors it reads that have a gradient (parameters and earlier steps)."""
        graded = set(self.params)
        out = {}
        for s in self.steps:
            out[s.name] = tuple(n for n in s.names_read() if n in graded)
            graded.add(s.name)
        return out

    def consumers(self, name: str) -> list[str]:
        """The steps that read `name`, in forward order: each is one branch of its gradient."""
        return [s.name for s in self.steps if name in self.inputs[s.name]]

    def upstream(self, name: str) -> set[str]:
        """The tensors whose gradients flow into `name`'s (nearer the loss; the loss left out)."""
        seen: set[str] = set()
        todo = self.consumers(name)
        while todo:
            c = todo.pop()
            if c not in seen:
                seen.add(c)
                todo.extend(self.consumers(c))
        seen.discard(self.loss)
        return seen

    def to_json(self) -> dict:
        """What the judge needs, for the source notebook's metadata: no solution (the release
        keeps a notebook's metadata)."""
        return {
            **{
                k: getattr(self, k)
                for k in ("name", "title", "params", "data", "constants", "asked", "files")
            },
            "seed": self.seed,
            "points": dict(self.points),
            "zero_gradients": dict(self.zero_gradients),
            "steps": [[s.name, s.expr, s.note] for s in self.steps],
            "in_one_go": [[g.exercise, g.target, g.start, g.points] for g in self.in_one_go],
            "training": [t.exercise, t.learning_rate, t.steps, t.points] if (t := self.training) else None,
            "setup": [[c.grade_id, c.code, c.text] for c in self.setup],
        }

    @classmethod
    def from_json(cls, j: dict) -> Definition:
        tup = lambda k: tuple(j[k])  # noqa: E731
        return cls(
            name=j["name"],
            title=j.get("title", ""),
            params=tup("params"),
            data=tup("data"),
            constants=tup("constants"),
            steps=tuple(Step(*s) for s in j["steps"]),
            asked=tuple(j["asked"]) if j.get("asked") is not None else None,
            points=dict(j.get("points", {})),
            zero_gradients=dict(j.get("zero_gradients", {})),
            in_one_go=tuple(InOneGo(*g) for g in j.get("in_one_go", [])),
            training=Training(*j["training"]) if j.get("training") else None,
            setup=tuple(Cell(*c) for c in j.get("setup", [])),
            files=tup("files"),
            seed=int(j["seed"]),
        )

    def backward_order(self) -> list[str]:
        """Every tensor with a gradient, each once all its consumers are done: the steps taken
        last to first, each one's inputs in the order it reads them (the lecture's order)."""
        done, order = {self.loss}, []
        for s in reversed(self.steps):
            if s.name not in done:
                continue
            for x in self.inputs[s.name]:
                if x not in done and all(c in done for c in self.consumers(x)):
                    order.append(x)
                    done.add(x)
        return order

    def gradients(self) -> list[Gradient]:
        """Exercise 1's gradients in backward order, then the in-one-go exercises', then the
        training exercise's (one a parameter, as manual_backward returns them)."""
        asked = list(self.asked) if self.asked is not None else self.backward_order()
        ex1 = [Gradient(1, "d" + t, t, float(self.points.get(t, 1.0))) for t in asked]
        one_go = [Gradient(g.exercise, "d" + g.target, g.target, g.points) for g in self.in_one_go]
        t = self.training
        return ex1 + one_go + ([Gradient(t.exercise, "d" + p, p, 1.0) for p in self.params] if t else [])

    @property
    def backward_arguments(self) -> tuple[str, ...]:
        """What manual_backward may take, by name: the batch, the sizes, every tensor of the
        forward pass but the loss, the parameters."""
        return (*self.data, *self.constants, *(s.name for s in self.steps[:-1]), *self.params)

    @cached_property
    def _code(self) -> dict:
        return {s.name: compile(s.expr, f"<{self.name}: {s.name}>", "eval") for s in self.steps}

    def forward(self, values: dict, on_step=None) -> dict:
        """Every step's tensor, evaluated in order from `values` (parameters, data, constants):
        torch and torch.nn.functional as F are in scope, as in the notebook. `on_step(name,
        tensor)` sees each one as it is made (the references keep its gradient)."""
        v = dict(values)
        for s in self.steps:
            v[s.name] = self.forward_step(s.name, v)
            if on_step is not None:
                on_step(s.name, v[s.name])
        return v

    def forward_step(self, name: str, values: dict):
        """One step's tensor from `values` (what it reads, and the constants)."""
        import torch
        import torch.nn.functional as F

        return eval(self._code[name], {"torch": torch, "F": F}, dict(values))  # the instructor's own text

    def forward_source(self) -> str:
        """The forward cell's code: each step on its line, its note beside it."""
        return "\n".join(f"{s.name} = {s.expr}" + (f" # {s.note}" if s.note else "") for s in self.steps)
