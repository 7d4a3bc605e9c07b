"""The third exercise, a single linear layer with softmax, added from its definition alone (issue
21): the unit tests derive its order, gradients and notebook from it, and the end-to-end test
writes it into a course with `backprop-ninja new tests/tiny_exercise.py COURSE`, then releases
and grades it with nbgrader."""

from grader.exercise.definition import Cell, Definition, Step

SETUP = """\
n, n_in, n_out = 8, 3, 5  # the batch and the layer's sizes
g = torch.Generator().manual_seed(42)
X = torch.randn(n, n_in, generator=g)
y = torch.randint(0, n_out, (n,), generator=g)
W = (torch.randn(n_in, n_out, generator=g) * 0.5).requires_grad_()
b = torch.zeros(n_out).requires_grad_()"""

TINY = Definition(
    name="tiny",
    title="A linear layer with softmax, by hand",
    params=("W", "b"),
    data=("X", "y"),
    constants=("n",),
    setup=(Cell("data", SETUP, "## The data and the layer"),),
    steps=(
        Step("logits", "X @ W + b"),
        Step("probs", "F.softmax(logits, 1)"),
        Step("logprobs", "probs.log()"),
        Step("loss", "-logprobs[range(n), y].mean()"),
    ),
    solution="""\
dlogprobs = torch.zeros_like(logprobs)
dlogprobs[range(n), y] = -1.0 / n
dprobs = dlogprobs / probs
dlogits = probs * (dprobs - (dprobs * probs).sum(1, keepdim=True))
dW = X.T @ dlogits
db = dlogits.sum(0)""",
)
