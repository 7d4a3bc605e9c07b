"""The student's `cmp` cell of a written exercise: the lecture's comparison with autograd, and
hints that need only the definition: which gradients each one is computed from (its consumers,
so a wrong upstream gradient is named first), a shape that is transposed or summed, a sign, a
factor of the batch size, a missing branch."""

from __future__ import annotations

from ..exercise.definition import Definition

_CMP = """\
# compare a gradient you computed by hand with the one PyTorch's autograd computed
def cmp(s, dt, t):
  if isinstance(dt, torch.Tensor) and dt.squeeze().shape == t.grad.squeeze().shape:
    dt = dt.reshape(t.grad.shape)  # (64,) for (1, 64), as broadcasting reads it
  if not isinstance(dt, torch.Tensor) or dt.shape != t.grad.shape:
    _seen[s] = (_this_run(), False)
    print(f'{s:15s} | {_shape_hint(dt, t.grad)}')
    return
  ex = torch.all(dt == t.grad).item()
  app = torch.allclose(dt, t.grad, rtol=1e-4, atol=1e-6)
  maxdiff = (dt - t.grad).abs().max().item()
  _seen[s] = (_this_run(), app)
  print(f'{s:15s} | exact: {str(ex):5s} | approximate: {str(app):5s} | maxdiff: {maxdiff}')
  if not app:
    wrong = _wrong_upstream(s)
    hint = (f'this may be right: d{wrong[-1]} above is wrong, and this gradient is computed from it; '
            'fix that first') if wrong else _value_hint(dt, t.grad, s)
    print(f'{"":15s} | hint: {hint}')

# the tensors each tensor feeds in the forward pass: its gradient is computed from theirs
_FEEDS = @FEEDS@
_seen = {}  # tensor name -> (the cell run it was compared in, whether it matched)

def _this_run():
  try:
    return get_ipython().execution_count  # one run of a cell in Jupyter or Colab
  except NameError:
    return None

def _wrong_upstream(s):
  run, todo, seen, wrong = _this_run(), list(_FEEDS.get(s, [])), set(), []
  while todo:
    c = todo.pop(0)
    if c not in seen:
      seen.add(c)
      if _seen.get(c, (None, True)) == (run, False):
        wrong.append(c)
      todo += _FEEDS.get(c, [])
  return wrong

def _shape_hint(dt, g):
  if not isinstance(dt, torch.Tensor):
    return f'not a tensor but {type(dt).__name__}'
  have, want = tuple(dt.shape), tuple(g.shape)
  if dt.dim() >= 2 and dt.transpose(-2, -1).shape == g.shape:
    return f'shape {have}, expected {want}: transposed? for Z = A @ B, dA = dZ @ B.T and dB = A.T @ dZ'
  if dt.numel() < g.numel():
    return (f'shape {have}, expected {want}: summed over a dimension that was not broadcast? '
            'a gradient has the shape of its tensor')
  return f'shape {have}, expected {want}: a gradient has the shape of its tensor'

def _value_hint(dt, g, s):
  n = g.new_tensor(float(globals().get('n', 0) or 1))
  for k, why in ((-1.0, 'the sign is flipped'),
                 (n, 'n times too big: the loss is a mean over the batch, divide by n once'),
                 (1/n, 'n times too small: divide by n once, not twice')):
    if (n != 1 or k == -1.0) and torch.allclose(dt, k * g, rtol=1e-4, atol=1e-6):
      return why
  if dt.dim() >= 2 and dt.shape[-1] == dt.shape[-2] and torch.allclose(dt, g.transpose(-2, -1)):
    return 'transposed: for Z = A @ B, dA = dZ @ B.T and dB = A.T @ dZ'
  if len(_FEEDS.get(s, [])) > 1:
    return ('part of the gradient is missing: this tensor feeds more than one step, and its gradient '
            'is the sum of what each step sends back (+=)')
  return 'the values differ: check this step\\'s local derivative'
"""


def feeds(d: Definition) -> dict[str, list[str]]:
    """Each graded tensor -> the steps that read it (the loss left out: it has no gradient)."""
    return {x: [c for c in d.consumers(x) if c != d.loss] for x in d.backward_order()}


def cmp_code(d: Definition) -> str:
    return _CMP.replace("@FEEDS@", _dict_text(feeds(d)))


def _dict_text(m: dict[str, list[str]]) -> str:
    """The dict as the lecture's cells write one: several entries a line, under 100 columns."""
    lines, line = [], "{"
    for k, v in m.items():
        item = f"{k!r}: {v!r}, "
        if len(line) + len(item) > 96:
            lines.append(line.rstrip())
            line = "  "
        line += item
    return "\n".join([*lines, line.rstrip().rstrip(",") + "}"])
