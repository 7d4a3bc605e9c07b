"""Backprop Ninja's demo class: a correct submission and a few with the mistakes students
typically make, each an edit of the instructor's answers (`backprop-ninja samples` writes them)."""

from __future__ import annotations

from ...incoming.submissions import Sample

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
