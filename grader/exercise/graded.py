"""What the judge, the replay and the feedback need to know of one graded assignment, derived
from its definition (grader/exercise/definition.py): its gradients and their grade ids, its
answer cells, the cells the replay leaves to the kernel, the seed it re-seeds, each in-one-go
exercise's own run. Backprop Ninja's is spec.NINJA; an exercise written by `backprop-ninja new`
carries its definition in its source notebook's metadata (`written`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .definition import Definition, GradedCell, Gradient

METADATA_KEY = "backprop_ninja"  # the source notebook's metadata: {"definition": {...}}


@dataclass(frozen=True)
class Check(GradedCell):
    """A graded cell that is not one gradient (Backprop Ninja's training point)."""

    points: float


@dataclass(frozen=True)
class OneGo:
    """An in-one-go exercise judged in a run of its own, handed the correct d<start>."""

    exercise: int
    start: str
    target: str

    @property
    def run(self) -> str:
        return f"ex{self.exercise}"  # the protocol's name of its run (Backprop Ninja's EX3)

    @property
    def cell(self) -> str:
        return answer_cell(self.exercise)


def answer_cell(exercise: int) -> str:
    return f"ex{exercise}_solution"


def training_cell(exercise: int) -> str:
    """The notebook's training loop (the kernel's only: the replay trains with its own)."""
    return f"ex{exercise}_train"


@dataclass(frozen=True)
class GradedExercise:
    definition: Definition
    assignment: str
    notebook: str
    gradients: tuple[Gradient, ...]
    checks: tuple[Check, ...] = ()
    kernel_only_cells: frozenset[str] = frozenset()  # locked cells the replay does not run
    batch_cell: str | None = None  # the locked cell that sets batch_size (the replay may change it)
    zero_gradients: dict[str, str] = field(default_factory=dict)  # mathematically zero: zeros are right
    training: int | None = None  # the exercise of the lecture's exercise 4's kind (manual_backward)
    training_arguments: tuple[str, ...] = ()  # what manual_backward may take, by name
    learning_rate: float = 0.0  # the replay's training run's
    plain_names: bool = False  # Backprop Ninja: its reports have the plain names (replay/, batch.json)

    @classmethod
    def written(cls, d: Definition) -> GradedExercise:
        """An exercise written from its definition (grader/authoring/notebook.py's cells)."""
        checks = {f"ex{ex}_check" for ex in {g.exercise for g in d.gradients()}}
        batch = d.batch and d.batch.grade_id
        t = d.training
        cells = frozenset({"autograd", *checks, *([training_cell(t.exercise)] if t else [])})
        return cls(
            d,
            d.name,
            d.name,
            tuple(d.gradients()),
            (Check(t.exercise, "training", t.points),) if t else (),
            cells,
            batch,
            dict(d.zero_gradients),
            training=t and t.exercise,
            training_arguments=d.backward_arguments if t else (),
            learning_rate=t.learning_rate if t else 0.0,
        )

    @classmethod
    def from_metadata(cls, metadata: dict) -> GradedExercise | None:
        """The exercise a notebook's metadata carries (`new` writes it), or None."""
        meta = (metadata or {}).get(METADATA_KEY) or {}
        return cls.written(Definition.from_json(meta["definition"])) if "definition" in meta else None

    @property
    def graded(self) -> list[Gradient | Check]:
        return [*self.gradients, *self.checks]

    @property
    def by_grade_id(self) -> dict[str, Gradient | Check]:
        return {g.grade_id: g for g in self.graded}

    @property
    def exercise1(self) -> list[Gradient]:
        return [g for g in self.gradients if g.exercise == 1]

    @property
    def exercises(self) -> list[int]:
        return sorted({g.exercise for g in self.graded})

    def answer_cell(self, exercise: int) -> str:
        return answer_cell(exercise)

    @property
    def one_go(self) -> list[OneGo]:
        """The in-one-go exercises that start below the loss: each has a run of its own."""
        return [
            OneGo(g.exercise, g.start, g.target)
            for g in self.definition.in_one_go
            if g.start != self.definition.loss
        ]

    def trains(self, g) -> bool:
        """Whether `g` belongs to the training exercise (its gradients come from manual_backward)."""
        return self.training is not None and g.exercise == self.training

    def records(self, reports: Path) -> Path:
        """Where the judge's per-student records go under the course's report folder: replay/ for
        Backprop Ninja (its reports read it), replay-<assignment>/ for each other exercise."""
        return reports / f"replay{self.suffix}"

    @property
    def suffix(self) -> str:
        """What tells this exercise's report files from another's in one course: -<assignment>."""
        return "" if self.plain_names else f"-{self.assignment}"

    def batch_files(self, reports: Path) -> tuple[Path, Path, Path]:
        """The batch's log, its workers' logs and its summary (autograde.log, autograde/ and
        batch.json for Backprop Ninja)."""
        s = self.suffix
        return reports / f"autograde{s}.log", reports / f"autograde{s}", reports / f"batch{s}.json"

    def exercise_points(self, exercise: int) -> float:
        return sum(g.points for g in self.graded if g.exercise == exercise)

    def total_points(self) -> float:
        return sum(g.points for g in self.graded)
