"""The replay plan: which of the notebook's cells a replay runs, re-seeded for the student,
and in which order the runs go. Trusted side; the plan travels to the runs as data
(grader/untrusted/protocol.py's ReplayPlan), and the runs by the protocol's names."""

from __future__ import annotations

import ast
from functools import lru_cache

from ..exercise import spec
from ..exercise.cells import nbgrader_meta, strip_magics
from ..exercise.definitions import backprop_ninja as lecture
from ..exercise.graded import GradedExercise
from ..settings import JudgeSettings
from ..untrusted.protocol import AS_SUBMITTED, PlanCell, local_gradients, run_name_local

EX1 = spec.NINJA.exercise1


class _Reseed(ast.NodeTransformer):
    """The locked cells, as the instructor wrote them, with the judge's seed and batch size."""

    def __init__(self, seed: int, batch_size: int | None, seed_constant: int):
        self.seed, self.batch_size, self.seed_constant = seed, batch_size, seed_constant

    def visit_Constant(self, node):
        if node.value == self.seed_constant and type(node.value) is int:
            return ast.copy_location(ast.Constant(self.seed), node)
        return node

    def visit_Assign(self, node):
        if (
            self.batch_size
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id == "batch_size"
        ):
            node.value = ast.copy_location(ast.Constant(self.batch_size), node.value)
        return self.generic_visit(node)


def reseed(
    source: str, seed: int, batch_size: int | None = None, seed_constant: int = lecture.LECTURE_SEED
) -> str:
    """`source` with `seed` for the exercise's own seed (`seed_constant`: the definition's)."""
    tree = _Reseed(seed, batch_size, seed_constant).visit(ast.parse(strip_magics(source)))
    return ast.unparse(ast.fix_missing_locations(tree))


@lru_cache(maxsize=64)
def _seeded(source: str, batch_size: int | None, seed_constant: int) -> bool:
    """Whether the cell depends on the seed (the same for every submission: cached)."""
    return reseed(source, 0, batch_size, seed_constant) != _unseeded(source, batch_size, seed_constant)


@lru_cache(maxsize=64)
def _unseeded(source: str, batch_size: int | None, seed_constant: int) -> str:
    """reseed's text for a cell that does not depend on the seed: any seed's, made once."""
    return reseed(source, 1, batch_size, seed_constant)


def _cell(label: str, kind: str, grade_id: str | None, source: str, seeded: bool = False) -> PlanCell:
    return {"label": label, "kind": kind, "grade_id": grade_id, "source": source, "seeded": seeded}


def replay_cells(cells, settings: JudgeSettings, exercise: GradedExercise = spec.NINJA) -> list[PlanCell]:
    """What the replay runs, in notebook order: locked cells (re-seeded) but those that use
    autograd or only report, the answer cells, and every cell the student added."""
    out, last, seed = [], "the top", exercise.definition.seed
    for cell in cells:
        meta = nbgrader_meta(cell)
        gid = meta.get("grade_id")
        if cell.get("cell_type") != "code":
            last = gid or last
            continue
        if meta.get("solution"):
            out.append(_cell(gid, "answer", gid, cell["source"]))
        elif meta.get("grade"):
            pass  # test cells: the judge grades, not the cell
        elif meta.get("locked"):
            if gid not in exercise.kernel_only_cells:
                size = settings.batch_size if gid == exercise.batch_cell else None
                seeded = _seeded(cell["source"], size, seed)  # else the same text for every submission
                if seeded:
                    source = reseed(cell["source"], settings.seed, size, seed)
                else:
                    source = _unseeded(cell["source"], size, seed)
                out.append(_cell(gid, "locked", gid, source, seeded))
        else:
            out.append(_cell(f"your cell after {last}", "added", None, cell["source"]))
        last = gid or last
    return out


def warm_prefix(cells: list[PlanCell], exercise: GradedExercise = spec.NINJA) -> list[PlanCell]:
    """The leading locked cells that do not depend on the seed: the same for every submission."""
    prefix = []
    for c in cells:
        if c["kind"] != "locked" or c["seeded"] or c["grade_id"] == exercise.batch_cell:
            break
        prefix.append(c)
    return prefix


def run_order(exercise: GradedExercise = spec.NINJA) -> list[str]:
    """Runs in this order so that no run is handed the correct value of a gradient whose
    own run is still to come: the student's notebook as is, then one run per exercise-1
    gradient in backward order, each in-one-go exercise's run right after the run of the
    gradient it asks for (Backprop Ninja's exercise 3, given dhpreact, before anything gets
    dhprebn)."""
    d = exercise.definition
    order = [AS_SUBMITTED]
    for g in exercise.exercise1:
        if d.upstream(g.target):
            order.append(run_name_local(g.name))
        order += [o.run for o in exercise.one_go if o.target == g.target]
    return order + [o.run for o in exercise.one_go if o.run not in order]


def what_is_asked(exercise: GradedExercise = spec.NINJA) -> dict:
    """The plan's part that names the exercise (protocol.ReplayPlan): which gradients the
    notebook's run keeps after each answer cell, exercise 1's, each in-one-go exercise's run
    and what it is handed, and whether there is a training exercise. The runner knows no more."""
    cell = exercise.answer_cell
    in_one_go = exercise.definition.in_one_go
    return {
        "snapshots": {
            cell(1): [g.name for g in exercise.exercise1],
            **{cell(g.exercise): ["d" + g.target] for g in in_one_go},
        },
        "exercise1": {g.name: g.target for g in exercise.exercise1},
        "exercise1_cell": cell(1),
        "one_go": {
            o.run: {"cell": o.cell, "inject": ["d" + o.start], "keep": "d" + o.target}
            for o in exercise.one_go
        },
        "cleared": [cell(g.exercise) for g in in_one_go],
        "training": training_plan(exercise),
    }


def training_plan(exercise: GradedExercise) -> dict | None:
    """What the runner needs to call manual_backward and train with it (protocol.TrainingPlan):
    the names it may take, its result's order, the rate; a written exercise's forward pass (its
    definition), where Backprop Ninja's exercise 4 has a forward of its own (network.py)."""
    if exercise.training is None:
        return None
    d = exercise.definition
    return {
        "arguments": list(exercise.training_arguments),
        "params": list(d.params),
        "learning_rate": exercise.learning_rate,
        "forward": d.to_json() if d.training is not None else None,
    }


def with_correct_inputs(run: str, grads: dict, exercise: GradedExercise = spec.NINJA) -> dict:
    """The correct values a run is handed: none for the notebook as submitted; every upstream
    gradient for a gradient's own rule ("local:dX"); d<start> for an in-one-go exercise's run
    (Backprop Ninja's "ex3": dhpreact)."""
    if local_gradients(run):  # a joint run's gradients are all handed the same (joint_runs)
        return {"d" + t: grads[t] for t in exercise.definition.upstream(local_gradients(run)[0][1:])}
    return {"d" + o.start: grads[o.start] for o in exercise.one_go if o.run == run}


def joint_runs(runs: list[str], exercise: GradedExercise = spec.NINJA) -> list[str]:
    """`runs`, with the own-rule runs of gradients handed the same upstream gradients made one
    ("local:dh+dW2+db2"), where the first of them was: a run is fixed by what it is handed, and
    which of its values are kept changes nothing in it. The order's promise holds: what the
    joint run is handed is what its first gradient's run was, and none of its gradients is
    upstream of another (each would be in its own upstream set)."""
    upstream = exercise.definition.upstream
    out: list[str] = []
    joined: dict[frozenset, int] = {}  # a set of upstream gradients -> its run's place in out
    for run in runs:
        gradients = local_gradients(run)
        if not gradients:
            out.append(run)
            continue
        key = frozenset(upstream(gradients[0][1:]))
        if key in joined:
            out[joined[key]] = run_name_local(*local_gradients(out[joined[key]]), *gradients)
        else:
            joined[key] = len(out)
            out.append(run)
    return out


def kernel_prefix(cells) -> list[str]:
    """The notebook's leading locked code cells, up to its first answer or graded cell, as the
    notebook has them (magics and all): the same in every submission (nbgrader puts locked cells
    back from the source before the kernel runs), so a warm kernel server may run them once for
    every kernel (grader/untrusted/kernel_prefix.py, which stops at the first that must really
    run, and runs them all for real where a submission's cells differ). More than the replay's
    warm prefix: the kernel runs the notebook as it is, its parameters and batch unseeded."""
    prefix = []
    for cell in cells:
        if cell.get("cell_type") != "code":
            continue
        meta = nbgrader_meta(cell)
        if not meta.get("locked") or meta.get("solution") or meta.get("grade"):
            break
        prefix.append(cell["source"])
    return prefix
