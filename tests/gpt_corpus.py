"""The GPT block's corpus (grader/exercise/definitions/gpt_block.py): the instructor's answers
changed as students change them, each with the grades it must get, gradient by gradient. Right
answers in two styles, the classic mistakes of each layer (LayerNorm's variance, a residual's
branch, attention's transpose, GELU's derivative, the tied embedding's second use), carried
errors (a wrong gradient whose consumers keep their points), the in-one-go exercises wrong, and
the cheats the replay refuses: autograd's answer read in the kernel, and torch's own derivative
kernel called. tests/e2e/test_new_exercise.py grades it through real nbgrader."""

from __future__ import annotations

from dataclasses import dataclass, field

from grader.authoring.notebook import training_answer
from grader.exercise.definitions.gpt_block import GPT_BLOCK as GPT
from grader.exercise.graded import GradedExercise

WRITTEN = GradedExercise.written(GPT)
# exercise 4's answer as a student writes it: the instructor's manual_backward, without the markers
MANUAL_BACKWARD = "".join(
    line for line in training_answer(GPT).splitlines(keepends=True) if "### " not in line
)
ANSWERS = {
    "ex1_solution": GPT.solution,
    **{f"ex{g.exercise}_solution": g.solution for g in GPT.in_one_go},
    "ex4_solution": MANUAL_BACKWARD,
}
EX1 = [g.grade_id for g in GPT.gradients() if g.exercise == 1]


@dataclass(frozen=True)
class Case:
    student: str
    changes: dict[str, list[tuple[str, str]]]  # answer cell -> (old, new) replacements
    zeros: frozenset[str] = frozenset()  # the grade ids that get nothing; the rest full points
    flags: tuple[str, ...] = ()  # kinds of flag the record must carry
    hint: tuple[str, str] | None = None  # (grade id, a phrase its hint must hold)
    carried: frozenset[str] = field(default_factory=frozenset)  # full points for a carried error

    def answers(self) -> dict[str, str]:
        out = dict(ANSWERS)
        for cell, pairs in self.changes.items():
            for old, new in pairs:
                assert old in out[cell], (self.student, old)
                out[cell] = out[cell].replace(old, new)
        return out


CASES = [
    Case("g01_right", {}),
    Case(
        "g02_right_other_style",  # one-hot where the instructor indexes, softmax where it uses exp
        {
            "ex1_solution": [
                (
                    "dlogits = dlogprobs - logprobs.exp() * dlogprobs.sum(-1, keepdim=True)",
                    "dlogits = (F.softmax(logits, -1) - F.one_hot(Yb, logits.shape[-1])) / (B*T)",
                ),
                (
                    "dwte.index_add_(0, Xb.flatten(), dtok_emb.flatten(0, 1))",
                    "dwte = dwte + F.one_hot(Xb, wte.shape[0]).float().flatten(0, 1).T"
                    " @ dtok_emb.flatten(0, 1)",
                ),
            ]
        },
    ),
    Case(
        "g03_bessel_in_layernorm",  # LayerNorm's variance divides by C, not C-1
        {
            "ex1_solution": [
                ("dln2diff2 = torch.ones_like(ln2diff2) / C", "dln2diff2 = torch.ones_like(ln2diff2) / (C-1)")
            ]
        },
        frozenset({"ex1_dln2diff2"}),
        hint=("ex1_dln2diff2", "a factor of C/(C-1)"),
        carried=frozenset({"ex1_dln2diff", "ex1_dx1"}),
    ),
    Case(
        "g04_residual_branch_missing",  # x0 feeds LayerNorm 1 and the residual: one branch only
        {"ex1_solution": [("dx0 += dln1diff + dln1mean / C", "pass")]},
        frozenset({"ex1_dx0"}),
        hint=("ex1_dx0", "the part of the gradient through `x1`"),
        carried=frozenset({"ex1_dtok_emb", "ex1_dwpe"}),
    ),
    Case(
        "g05_attention_key_untransposed",
        {"ex1_solution": [("dk = dscores.transpose(1, 2) @ q", "dk = dscores @ q")]},
        frozenset({"ex1_dk"}),
        carried=frozenset({"ex1_dln1", "ex1_dWk"}),
    ),
    Case(
        "g06_gelu_tanh_derivative",  # 1 - th, not 1 - th**2
        {"ex1_solution": [("dgelu_in = (1 - gelu_th**2) * dgelu_th", "dgelu_in = (1 - gelu_th) * dgelu_th")]},
        frozenset({"ex1_dgelu_in"}),
        carried=frozenset({"ex1_dfc", "ex1_dfc3"}),
        hint=("ex1_dgelu_in", "the local derivative of tanh is 1 - tanh**2, not 1 - tanh"),  # its catalogue's
    ),
    Case(
        "g07_tied_embedding_one_use",  # wte is read twice: the embedding's share is missing
        {"ex1_solution": [("dwte.index_add_(0, Xb.flatten(), dtok_emb.flatten(0, 1))", "pass")]},
        frozenset({"ex1_dwte"}),
        hint=("ex1_dwte", "the part of the gradient through `logits` but not the part through `tok_emb`"),
    ),
    Case(
        "g08_reads_autograds_answer",  # right in the kernel, where wpe.grad exists
        {"ex1_solution": [("dwpe = dx0.sum(0)", "dwpe = wpe.grad.clone()")]},
        frozenset({"ex1_dwpe"}),
        flags=("autograd",),
    ),
    Case(
        "g09_torchs_softmax_backward",  # torch's own derivative kernel, called by its op
        {
            "ex1_solution": [
                (
                    "dmasked = att * (datt - (datt * att).sum(-1, keepdim=True))",
                    "dmasked = torch.ops.aten._softmax_backward_data(datt, att, -1, torch.float32)",
                )
            ]
        },
        frozenset({"ex1_dmasked"}),
        flags=("autograd",),
        carried=frozenset({"ex1_dscaled", "ex1_dq"}),
    ),
    Case(
        "g10_layernorm_in_one_go_without_rstd",
        {"ex2_solution": [("dx2 = lnfrstd * (", "dx2 = (")]},
        frozenset({"ex2_dx2"}),
    ),
    Case(
        "g11_attention_in_one_go_unscaled",
        {"ex3_solution": [("dscores = C**-0.5 * att", "dscores = att")]},
        frozenset({"ex3_dscores"}),
        hint=("ex3_dscores", "a factor of C**0.5"),
    ),
    Case(
        "g12_exercise_1_not_done",  # exercises 2 and 3 are handed the gradients they start from
        {"ex1_solution": [(GPT.solution, "raise NotImplementedError()")]},
        frozenset(EX1),
    ),
    Case(
        "g13_manual_backward_dWproj_transposed",  # its shape no longer fits: the training loop stops
        {
            "ex4_solution": [
                (
                    "dWproj = gelu.flatten(0, 1).T @ dmlp.flatten(0, 1)",
                    "dWproj = dmlp.flatten(0, 1).T @ gelu.flatten(0, 1)",
                )
            ]
        },
        frozenset({"ex4_dWproj", "ex4_training"}),
        hint=("ex4_dWproj", "transposed"),
    ),
    Case(
        "g14_manual_backward_wte_negated",  # every shape right, one direction wrong: the net learns less
        {"ex4_solution": [("    return [dwte, ", "    return [-dwte, ")]},
        frozenset({"ex4_dwte", "ex4_training"}),
    ),
]


def expected_scores(case: Case) -> dict[str, float]:
    return {g.grade_id: 0.0 if g.grade_id in case.zeros else g.points for g in WRITTEN.graded}


def write_submissions(course, cases) -> None:
    """Each case's answers in the course's released notebook, under submitted/<student>/gpt_block/."""
    import nbformat

    release = nbformat.read(course / "release" / "gpt_block" / "gpt_block.ipynb", 4)
    for case in cases:
        nb, answers = nbformat.from_dict(release), case.answers()
        for cell in nb.cells:
            cell.source = answers.get(cell.metadata["nbgrader"]["grade_id"], cell.source)
        (course / "submitted" / case.student / "gpt_block").mkdir(parents=True)
        nbformat.write(nb, course / "submitted" / case.student / "gpt_block" / "gpt_block.ipynb")
