"""The demo's sample class: a correct submission and a few with the mistakes students
typically make. `python -m grader.samples [COURSE]` writes them into COURSE/submitted/."""

from __future__ import annotations

import sys
from pathlib import Path

from .submissions import Sample, write_submissions

DEMO = [
    Sample("alice", "correct, the lecture's solutions"),
    Sample(
        "bob",
        "Bessel's correction forgotten: n instead of n-1 in exercises 1 and 3",
        {
            "ex1_solution": [("dbndiff2 = (1.0/(n-1))*", "dbndiff2 = (1.0/n)*")],
            "ex3_solution": [("n/(n-1)*bnraw", "bnraw")],
        },
    ),
    Sample(
        "carol",
        "`=` instead of `+=`: the branch of counts through counts_sum is lost",
        {
            "ex1_solution": [
                (
                    "dcounts += torch.ones_like(counts) * dcounts_sum",
                    "dcounts = torch.ones_like(counts) * dcounts_sum",
                )
            ],
        },
    ),
    Sample(
        "dave",
        "transposed dW2 in exercise 1; tanh derivative 1-h instead of 1-h**2 in exercise 4",
        {
            "ex1_solution": [("dW2 = h.T @ dlogits", "dW2 = dlogits.T @ h")],
            "ex4_solution": [("dhpreact = (1.0 - h**2) * dh", "dhpreact = (1.0 - h) * dh")],
        },
    ),
    Sample("erin", "submitted the release without answering", blank=True),
]


def main(argv: list[str]) -> int:
    course = Path(argv[0] if argv else ".").resolve()
    for path in write_submissions(DEMO, course=course):
        print(f"wrote {path.relative_to(course)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
