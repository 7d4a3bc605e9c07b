"""The hint corpus: one mistake each, modelled on the classes of mistakes real solutions of this
exercise make (issue 19: an exception of the student's own, a name or constant of their own,
a rename, a stub left in place, one exercise stopped early, a value off in a way a student can
act on) and on their styles (renamed labels, own constants, loops, one-hot, `scatter_`, einsum).

Each case names the gradient whose hint is read, phrases the hint must contain (`says`, all
of them) and phrases it must not (`never`): what a careful TA would write, and what would send
the student the wrong way. `check_says`/`check_never` are the same for the student's own `cmp`
in the notebook: what the exercise-1 check cell printed for the tensor `check_of`.

    .venv/bin/python tests/hint_corpus.py [CASE...]    the judge's hint for each case, and
                                                       whether it is right (no sandbox: a
                                                       plain replay server, for a quick look)
"""

from __future__ import annotations

from dataclasses import dataclass

from grader.incoming.submissions import Sample

EX1, EX2, EX3, EX4 = "ex1_solution", "ex2_solution", "ex3_solution", "ex4_solution"
STUB = "# YOUR CODE HERE\nraise NotImplementedError()"


@dataclass
class HintCase:
    sample: Sample
    grade_id: str  # the gradient whose hint is read
    says: tuple[str, ...]
    never: tuple[str, ...] = ()
    check_of: str | None = None  # the tensor whose line of the student's cmp is read, if any
    check_says: tuple[str, ...] = ()
    check_never: tuple[str, ...] = ()


def _case(student, what, grade_id, says, never=(), edits=None, replace=None, added=(), **check):
    sample = Sample(f"hint_{student}", what, edits or {}, replace=replace or {}, added=list(added))
    return HintCase(sample, grade_id, tuple(says), tuple(never), **check)


def check_lines(cells: list, tensor: str) -> str:
    """What the student's cmp printed for `tensor` in the exercise-1 check cell: its line and
    the hint line under it."""
    cell = next(c for c in cells if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "ex1_check")
    streams = [o for o in cell.get("outputs", []) if o.get("output_type") == "stream"]
    text = "".join("".join(o.get("text", "")) for o in streams)
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.split("|")[0].strip() == tensor:
            hint = lines[i + 1] if i + 1 < len(lines) and lines[i + 1].split("|")[0].strip() == "" else ""
            return line + "\n" + hint
    return ""


def check_judged(case: HintCase, text: str) -> list[str]:
    wrong = [f"the check does not say {s!r}" for s in case.check_says if s not in text]
    return wrong + [f"the check says {s!r}" for s in case.check_never if s in text]


GENERIC = "values differ from the reference"
LOGPROBS = "dlogprobs = torch.zeros_like(logprobs)\ndlogprobs[range(n), Yb] = -1.0/n"
D2 = "(1.0/(n-1))*torch.ones_like(bndiff2) * dbnvar"  # the lecture's dbndiff2
DC_LOOP = (
    "for k in range(Xb.shape[0]):\n  for j in range(Xb.shape[1]):\n    ix = Xb[k,j]\n    dC[ix] += demb[k,j]"  # noqa: E501
)
HINTS = [
    # ------------------------------------------------ the student's own exception, on their line
    _case(
        "batch_const",
        "a constant of the student's own that the notebook never defines",
        "ex1_dlogprobs",
        ["`BATCH_SIZE` is not defined", "`n`"],
        ["all zeros", GENERIC],
        {EX1: [("dlogprobs[range(n), Yb] = -1.0/n", "dlogprobs[range(n), Yb] = -1.0/BATCH_SIZE")]},
    ),
    _case(
        "batch_const_later",
        "an undefined constant in a later gradient's branch",
        "ex1_dhprebn",
        ["`BATCH_SIZE` is not defined", "line"],
        ["but not the part through", "missing", GENERIC],
        {EX1: [("dhprebn += 1.0/n *", "dhprebn += (1.0 / BATCH_SIZE) *")]},
    ),
    _case(
        "comma_typo",
        "a comma where a dot belongs: (a),sum(0, keepdim=True)",
        "ex1_dbnvar_inv",
        ["raised TypeError", "line"],
        ["not defined when", GENERIC],
        {EX1: [("(bndiff * dbnraw).sum(0, keepdim=True)", "(bndiff * dbnraw),sum(0, keepdim=True)")]},
    ),
    _case(
        "own_name_late",
        "the student's own name for dbndiff2, used before it is assigned",
        "ex1_dbndiff",
        ["`dbndiff_sq` is not defined", "line", "assigned later"],
        ["but not the part through", "all zeros"],
        {
            EX1: [
                (
                    f"dbndiff2 = {D2}\ndbndiff += (2*bndiff) * dbndiff2",
                    f"dbndiff += (2*bndiff) * dbndiff_sq\ndbndiff_sq = {D2}",
                )
            ]
        },
    ),
    _case(
        "labels_lower",
        "exercise 2 with the labels renamed yb",
        "ex2_dlogits",
        ["`yb` is not defined", "`Yb`"],
        ["write `dlogits[range(n), Yb] -= 1`", "subtract 1 at the correct class"],
        {EX2: [("dlogits[range(n), Yb] -= 1", "dlogits[range(n), yb] -= 1")]},
    ),
    _case(
        "labels_y_batch",
        "exercise 1 with the labels of the student's own name",
        "ex1_dlogprobs",
        ["`Y_batch` is not defined"],
        ["all zeros", GENERIC],
        {EX1: [("dlogprobs[range(n), Yb] = -1.0/n", "dlogprobs[range(n), Y_batch] = -1.0/n")]},
    ),
    _case(
        "shapes_dh",
        "dh without the transpose: the matmul raises",
        "ex1_dh",
        ["raised RuntimeError", "line"],
        ["not defined when"],
        {EX1: [("dh = dlogits @ W2.T", "dh = dlogits @ W2")]},
    ),
    _case(
        "ex3_own_constant",
        "exercise 3 with a batch size of the student's own name",
        "ex3_dhprebn",
        ["`N` is not defined", "`n`"],
        [GENERIC, "Bessel"],
        replace={
            EX3: "dhprebn = bngain*bnvar_inv/N * (N*dhpreact - dhpreact.sum(0) "
            "- N/(N-1)*bnraw*(dhpreact*bnraw).sum(0))"
        },
    ),
    # ------------------------------------------------ renames and typos, from what the notebook holds
    _case(
        "renamed_dbnsqdiff",
        "dbndiff2 under a name of the student's own",
        "ex1_dbndiff2",
        ["`dbnsqdiff`", "name it `dbndiff2`"],
        ["`dbndiff`:", "a typo?"],
        {EX1: [("dbndiff2 = (1.0/(n-1))", "dbnsqdiff = (1.0/(n-1))"), ("* dbndiff2", "* dbnsqdiff")]},
    ),
    _case(
        "renamed_unlike",
        "dbndiff2 under a name of the student's own that looks nothing like it",
        "ex1_dbndiff2",
        ["`sq_grad` holds exactly its value", "name it `dbndiff2`"],
        ["assign it in the answer cell", "did you mean"],
        {EX1: [("dbndiff2 = (1.0/(n-1))", "sq_grad = (1.0/(n-1))"), ("* dbndiff2", "* sq_grad")]},
    ),
    _case(
        "renamed_dW1_beside_a_wrong_one",
        "dW1 as the student's own name, beside a scratch tensor of its shape with another value",
        "ex1_dW1",
        ["`W1_grad` holds exactly its value"],
        ["`scratch`", "assign it in the answer cell"],
        {EX1: [("dW1 = embcat.T @ dhprebn", "scratch = torch.zeros_like(W1)\nW1_grad = embcat.T @ dhprebn")]},
    ),
    _case(
        "typo_dlogits_maxes",
        "dlogit_maxes misspelt, everywhere",
        "ex1_dlogit_maxes",
        ["`dlogits_maxes`"],
        ["all zeros"],
        {EX1: [("dlogit_maxes = ", "dlogits_maxes = "), ("* dlogit_maxes", "* dlogits_maxes")]},
    ),
    _case(
        "ex2_stub",
        "exercise 2 left as its stub, with names of the student's own in exercise 1",
        "ex2_dlogits",
        ["stub"],
        ["dlogits_1", "a typo?"],
        {EX1: [("dlogits = dnorm_logits.clone()", "dlogits_1 = dnorm_logits.clone()\ndlogits = dlogits_1")]},
        replace={EX2: STUB},
    ),
    # ------------------------------------------------ each exercise from its own cells
    _case(
        "stopped_early",
        "exercise 1 stopped after dnorm_logits; exercise 3 raises",
        "ex1_dhprebn",
        ["not defined"],
        ["ex3_solution", "exercise 3"],
        replace={
            EX1: "\n".join(
                [
                    "dlogprobs = torch.zeros_like(logprobs)",
                    "dlogprobs[range(n), Yb] = -1.0/n",
                    "dprobs = (1.0 / probs) * dlogprobs",
                    "dcounts_sum_inv = (counts * dprobs).sum(1, keepdim=True)",
                    "dcounts = counts_sum_inv * dprobs",
                    "dcounts_sum = (-counts_sum**-2) * dcounts_sum_inv",
                    "dcounts += torch.ones_like(counts) * dcounts_sum",
                    "dnorm_logits = counts * dcounts",
                ]
            ),
            EX3: "dhprebn = bngain*bnvar_inv/n * (n*dhpreact - dhpreact.sum(0) - undefined_name)",
        },
    ),
    # ------------------------------------------------ values off in a way a student can act on
    _case(
        "dC_from_ones",
        "dC accumulated into torch.ones_like(C)",
        "ex1_dC",
        ["off by exactly 1", "zeros"],
        [GENERIC],
        {EX1: [("dC = torch.zeros_like(C)", "dC = torch.ones_like(C)")]},
        check_of="C",
        check_says=("off by exactly 1",),
    ),
    _case(
        "plus_for_times",
        "dhpreact with + where * belongs",
        "ex1_dhpreact",
        ["`+`", "`*`"],
        [GENERIC],
        {EX1: [("dhpreact = (1.0 - h**2) * dh", "dhpreact = (1.0 - h**2) + dh")]},
    ),
    _case(
        "extra_factor",
        "dbndiff2 = bndiff * dbnvar: a forward value where the constant belongs",
        "ex1_dbndiff2",
        ["`bndiff`"],
        [GENERIC],
        {EX1: [("dbndiff2 = (1.0/(n-1))*torch.ones_like(bndiff2) * dbnvar", "dbndiff2 = bndiff * dbnvar")]},
    ),
    # ------------------------------------------------ exercise 4
    _case(
        "ex4_transposed",
        "exercise 4's dW2 transposed: the notebook's update cannot add it",
        "ex4_training",
        ["shape"],
        ["direction", "learned nothing"],
        {EX4: [("dW2 = h.T @ dlogits", "dW2 = (h.T @ dlogits).T")]},
    ),
    # ------------------------------------------------ the classic wrong rules, in every style
    _case(
        "dprobs_times",
        "dprobs with probs where 1/probs belongs",
        "ex1_dprobs",
        ["1/x"],
        [GENERIC],
        {EX1: [("dprobs = (1.0 / probs) * dlogprobs", "dprobs = probs * dlogprobs")]},
    ),
    _case(
        "tanh_one_minus_h",
        "the local derivative of tanh as 1 - h",
        "ex1_dhpreact",
        ["1 - h**2"],
        [GENERIC],
        {EX1: [("dhpreact = (1.0 - h**2) * dh", "dhpreact = (1.0 - h) * dh")]},
    ),
    _case(
        "bessel_n",
        "n for n-1 in dbndiff2",
        "ex1_dbndiff2",
        ["Bessel"],
        [GENERIC],
        {EX1: [("dbndiff2 = (1.0/(n-1))*", "dbndiff2 = (1.0/n)*")]},
        check_of="bndiff",
        check_says=("this may be right: dbndiff2 above is wrong",),
        check_never=("local derivative",),
    ),
    _case(
        "equals_for_plus",
        "= where += belongs: the branch through counts_sum lost",
        "ex1_dcounts",
        ["but not the part through `probs`"],
        [GENERIC, "not defined"],
        {EX1: [("dcounts += torch.ones_like(counts)", "dcounts = torch.ones_like(counts)")]},
    ),
    _case(
        "dW2_transposed",
        "dW2 as dlogits.T @ h",
        "ex1_dW2",
        ["transposed"],
        [GENERIC],
        {EX1: [("dW2 = h.T @ dlogits", "dW2 = dlogits.T @ h")]},
    ),
    _case(
        "db2_wrong_dim",
        "db2 summed over the classes",
        "ex1_db2",
        ["summed over the wrong dimension"],
        [GENERIC],
        {EX1: [("db2 = dlogits.sum(0)", "db2 = dlogits.sum(1)")]},
    ),
    _case(
        "dlogprobs_sign",
        "dlogprobs with the sign flipped",
        "ex1_dlogprobs",
        ["sign is flipped"],
        [GENERIC],
        {EX1: [("dlogprobs[range(n), Yb] = -1.0/n", "dlogprobs[range(n), Yb] = 1.0/n")]},
        check_of="logprobs",
        check_says=("sign is flipped",),
    ),
    _case(
        "downstream_of_dh",
        "dh wrong by a factor: every gradient below it is computed from it",
        "ex1_dW1",
        ["your rule is right", "`dhprebn`"],
        [GENERIC],
        {EX1: [("dh = dlogits @ W2.T", "dh = 2 * (dlogits @ W2.T)")]},
        check_of="W1",
        check_says=("this may be right: dh above is wrong",),
        check_never=("local derivative",),
    ),
    _case(
        "dlogprobs_no_mean",
        "dlogprobs without the mean's 1/n",
        "ex1_dlogprobs",
        ["divide by n once"],
        [GENERIC],
        {EX1: [("dlogprobs[range(n), Yb] = -1.0/n", "dlogprobs[range(n), Yb] = -1.0")]},
    ),
    _case(
        "dbnmeani_sign",
        "dbnmeani with the sign flipped",
        "ex1_dbnmeani",
        ["sign is flipped"],
        [GENERIC],
        {EX1: [("dbnmeani = (-dbndiff).sum(0)", "dbnmeani = dbndiff.sum(0)")]},
    ),
    _case(
        "dembcat_no_T",
        "dembcat without the transpose: the matmul raises",
        "ex1_dembcat",
        ["raised RuntimeError", "line"],
        ["not defined when"],
        {EX1: [("dembcat = dhprebn @ W1.T", "dembcat = dhprebn @ W1")]},
    ),
    _case(
        "dbnvar_power",
        "dbnvar with the exponent -0.5 where -1.5 belongs",
        "ex1_dbnvar",
        ["`bnvar"],
        [GENERIC],
        {EX1: [("(-0.5*(bnvar + 1e-5)**-1.5)", "(-0.5*(bnvar + 1e-5)**-0.5)")]},
    ),
    _case(
        "dC_equals",
        "dC with = where += belongs (a character seen twice keeps one gradient)",
        "ex1_dC",
        ["kept only its last gradient", "+="],
        [GENERIC],
        {EX1: [("dC[ix] += demb[k,j]", "dC[ix] = demb[k,j]")]},
    ),
    # ------------------------------------------------ the styles of real solutions
    _case(
        "onehot_no_n",
        "dlogprobs from one_hot without the 1/n",
        "ex1_dlogprobs",
        ["divide by n once"],
        [GENERIC],
        {EX1: [(LOGPROBS, "dlogprobs = -F.one_hot(Yb, 27).float()")]},
    ),
    _case(
        "scatter_sign",
        "dlogprobs with scatter_, the sign flipped",
        "ex1_dlogprobs",
        ["sign is flipped"],
        [GENERIC],
        {EX1: [("dlogprobs[range(n), Yb] = -1.0/n", "dlogprobs.scatter_(1, Yb.view(-1, 1), 1.0/n)")]},
    ),
    _case(
        "scatter_own_constant",
        "dlogprobs with scatter_ and a constant of the student's own",
        "ex1_dlogprobs",
        ["`BS` is not defined", "`n`"],
        ["all zeros"],
        {EX1: [("dlogprobs[range(n), Yb] = -1.0/n", "dlogprobs.scatter_(1, Yb.view(-1, 1), -1.0/BS)")]},
    ),
    _case(
        "einsum_transposed",
        "dW1 by einsum, transposed",
        "ex1_dW1",
        ["transposed"],
        [GENERIC],
        {EX1: [("dW1 = embcat.T @ dhprebn", "dW1 = torch.einsum('bi,bj->ji', embcat, dhprebn)")]},
    ),
    _case(
        "index_add_own_name",
        "dC by index_add_ from a name of the student's own",
        "ex1_dC",
        ["`demb_flat` is not defined", "from `demb`"],
        ["all zeros", "`dembcat`"],
        {EX1: [(DC_LOOP, "dC.index_add_(0, Xb.view(-1), demb_flat)")]},
    ),
    _case(
        "loop_labels",
        "dlogprobs in a loop over the batch, the labels named y",
        "ex1_dlogprobs",
        ["`y` is not defined", "`Yb`"],
        ["all zeros"],
        {EX1: [("dlogprobs[range(n), Yb] = -1.0/n", "for i in range(n):\n  dlogprobs[i, y[i]] = -1.0/n")]},
    ),
    _case(
        "ex2_no_mean",
        "exercise 2 without the division by n",
        "ex2_dlogits",
        ["divide by n once"],
        [GENERIC],
        {EX2: [("dlogits /= n", "")]},
    ),
    _case(
        "ex2_no_minus_one",
        "exercise 2 without subtracting 1 at the labels",
        "ex2_dlogits",
        ["subtract 1 at the correct class"],
        [GENERIC],
        {EX2: [("dlogits[range(n), Yb] -= 1\n", "")]},
    ),
    _case(
        "ex3_bessel",
        "exercise 3 without Bessel's correction",
        "ex3_dhprebn",
        ["Bessel"],
        [GENERIC],
        {EX3: [("n/(n-1)*bnraw", "bnraw")]},
    ),
    _case(
        "ex3_comma",
        "exercise 3 with a comma typo",
        "ex3_dhprebn",
        ["raised TypeError"],
        ["not defined when"],
        {EX3: [("dhpreact.sum(0) - n/(n-1)", "dhpreact,sum(0) - n/(n-1)")]},
    ),
    _case(
        "ex4_undefined",
        "exercise 4's function reads a name of the student's own",
        "ex4_dC",
        ["`BATCH` is not defined", "`n`"],
        ["NameError: name"],
        {EX4: [("dlogits /= n", "dlogits /= BATCH")]},
    ),
    _case(
        "ex4_keepdim_db2",
        "exercise 4's db2 kept as (1, 27): the notebook's update cannot add it",
        "ex4_training",
        ["shape (1, 27)", "b2"],
        ["direction", "learned nothing"],
        {EX4: [("db2 = dlogits.sum(0)", "db2 = dlogits.sum(0, keepdim=True)")]},
    ),
]

CASES = {c.sample.student: c for c in HINTS}


def verdict_text(verdict: dict) -> str:
    """What the feedback shows of a verdict: its lines (the hint is the last)."""
    return "\n".join(verdict.get("lines") or [])


def judged(case: HintCase, text: str) -> list[str]:
    """What is wrong with `text` as the case's hint (nothing: it is right)."""
    wrong = [f"does not say {s!r}" for s in case.says if s not in text]
    return wrong + [f"says {s!r}" for s in case.never if s in text]


def main(only: list[str]) -> int:
    import sys
    from pathlib import Path

    import nbformat

    root = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(root))
    from grader.exercise import spec
    from grader.replay.client import launch_plain
    from grader.settings import JudgeSettings
    from grader.verdicts.judge import judge_submission

    from conftest import find_names_txt

    nb_path = f"{spec.ASSIGNMENT}/{spec.NOTEBOOK}.ipynb"
    source, release = (nbformat.read(root / d / nb_path, 4) for d in ("source", "release"))
    right = 0
    cases = [CASES[s] for s in only] if only else HINTS
    for case in cases:
        nb = case.sample.notebook(source_nb=source, release_nb=release)
        record = judge_submission(
            nb.cells,
            student=case.sample.student,
            settings=JudgeSettings(seed=1234),
            names_txt=find_names_txt(),
            launcher=launch_plain,
        )
        text = verdict_text(record.to_json()["verdicts"][case.grade_id])
        wrong = judged(case, text)
        right += not wrong
        print(f"{'ok ' if not wrong else 'BAD'} {case.sample.student} {case.grade_id}\n    {text!r}")
        for w in wrong:
            print(f"    - {w}")
    print(f"{right}/{len(cases)} hints right")
    return 0


if __name__ == "__main__":
    import sys

    raise SystemExit(main(sys.argv[1:]))
