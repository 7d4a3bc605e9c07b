"""The exercise, defined once: every graded gradient, its grade id and its points, derived
from the exercise's definition (its forward pass, grader/exercise/definitions/backprop_ninja/)
and the notebook's cells: Backprop Ninja as the judge grades it (NINJA).

Everything else (the notebook's test cells, the replay, the hints, the report, the
tests) derives from this list, so a grade id or a point value changes there only.
"""

from __future__ import annotations

from .definition import Gradient
from .definitions.backprop_ninja import BACKPROP_NINJA, EX4_ARGUMENTS, EX4_FUNCTION, LEARNING_RATE  # noqa: F401
from .graded import Check, GradedExercise

ASSIGNMENT = "backprop_ninja"
NOTEBOOK = "backprop_ninja"

# The exercise's tensors, its order and its gradients derive from its definition
# (grader/exercise/definitions/backprop_ninja/: the forward pass as the lecture chunks it).
EXERCISE = BACKPROP_NINJA
# The lecture's `parameters`, in its order: exercise 4 returns their gradients in this order.
PARAMETERS = list(EXERCISE.params)

GRADIENTS: list[Gradient] = EXERCISE.gradients() + [Gradient(4, "d" + t, t, 1.0) for t in PARAMETERS]


# Exercise 4's training run: the loss must fall when the net learns with the student's backward.
TRAINING = Check(4, "training", 1.0)

GRADED: list[Gradient | Check] = GRADIENTS + [TRAINING]
BY_GRADE_ID: dict[str, Gradient | Check] = {g.grade_id: g for g in GRADED}
ANSWER_CELLS = {ex: f"ex{ex}_solution" for ex in (1, 2, 3, 4)}

# Gradients that are mathematically zero: autograd returns float noise, zeros are right too.
ZERO_GRADIENTS = EXERCISE.zero_gradients


def exercise_points(exercise: int) -> float:
    return sum(g.points for g in GRADED if g.exercise == exercise)


def total_points() -> float:
    return sum(g.points for g in GRADED)


# Locked cells the replay does not run: they call autograd, or only report (exercise 4's
# training is replayed by the grader's own loop with the student's manual_backward).
KERNEL_ONLY_CELLS = {
    "autograd",
    "ex1_check",
    "ex2_check",
    "ex3_check",
    "ex4_gradcheck",
    "ex4_train",
    "ex4_calibrate",
    "ex4_eval",
    "ex4_sample",
}
# The locked cell that sets the batch size; the replay may change it (same shapes by default).
BATCH_CELL = "batch"


# All of the above as the judge takes any graded exercise (grader/exercise/graded.py).
NINJA = GradedExercise(
    EXERCISE,
    ASSIGNMENT,
    NOTEBOOK,
    tuple(GRADIENTS),
    (TRAINING,),
    frozenset(KERNEL_ONLY_CELLS),
    BATCH_CELL,
    ZERO_GRADIENTS,
    training=4,
    training_arguments=EX4_ARGUMENTS,
    learning_rate=LEARNING_RATE,
    plain_names=True,
)
