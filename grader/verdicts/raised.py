"""A gradient its own cell did not compute: the statement that raised, in the student's own words
(the name it lacked, and what the notebook calls it), a stub left in place, or a name of the
student's own where the lecture's belongs.

Only the gradient's own answer cell is read (an exercise is judged from its cells), and for
exercise 1 the run that handed the student's rule correct upstream gradients: an error there is
the student's, not one they inherited.
"""

from __future__ import annotations

import difflib
import re

from ..exercise import spec

GRADIENT_NAMES = {g.name for g in spec.GRADIENTS}
_UNDEFINED = re.compile(r"NameError: name '(?P<name>[A-Za-z_][A-Za-z0-9_]*)' is not defined")
# What the lecture calls what students often name otherwise
_BATCH_SIZE = re.compile(r"(?i)^(n|n_?batch|batch(_?size)?|bs|b|num_?examples)$")
_LABELS = re.compile(r"(?i)^(y|y_?b|y_?batch|labels?|targets?)$")


def in_cell(errors: list[dict], cell: str | None) -> list[dict]:
    """The errors of the gradient's own answer cell (none for exercise 4's, a function's)."""
    return [e for e in errors if cell is not None and e.get("cell") == cell]


def in_words(error: str, names: list[str]) -> str:
    """An error message with its undefined name said as the hints say it (exercise 4's call)."""
    undefined = _UNDEFINED.search(error)
    if not undefined:
        return error
    head, missing = error[: undefined.start()], undefined["name"]
    return f"{head}NameError: `{missing}` is not defined{_instead(missing, names)}"


def raised(name: str, errors: list[dict], *, names: list[str]) -> str | None:
    """The hint when a statement that assigns `name` raised: that statement's own exception,
    and for an undefined name what the notebook has instead. None: no such statement."""
    e = next((e for e in errors if name in e.get("assigns", [])), None)
    if e is None:
        return None
    where = f"{e['cell']}, line {e['line']}"
    undefined = _UNDEFINED.match(e["error"])
    if undefined:
        missing = undefined["name"]
        return f"`{missing}` is not defined when your line runs ({where}){_instead(missing, names)}"
    return f"the statement that assigns {name} ({where}) raised {e['error']}"


def _instead(missing: str, names: list[str]) -> str:
    """What the notebook has where the student wrote `missing`."""
    if missing in names:
        return ": it is assigned later; compute it before the line that uses it"
    if _BATCH_SIZE.match(missing):
        return ": the notebook's batch size is `n`"
    if _LABELS.match(missing):
        return ": the batch's labels are `Yb`"
    same = [x for x in names if x.lower() == missing.lower()]
    if same:
        return f": the notebook's is `{same[0]}`"
    stem = missing.rsplit("_", 1)[0]
    if stem != missing and stem in names:  # `demb_flat`: the student's own name for a form of `demb`
        return f": define it in this cell before this line (from `{stem}`?)"
    close = difflib.get_close_matches(missing, [x for x in names if not x.startswith("_")], n=2, cutoff=0.75)
    if close:
        return "; did you mean " + " or ".join(f"`{c}`" for c in close) + "?"
    return ": assign it in this cell, or use the lecture's name"


def unassigned(name: str, *, names: list[str], errors: list[dict], renamed: str | None = None) -> str:
    """`name` was never assigned in its cell (`errors`: that cell's; `names`: the notebook's
    global names; `renamed`: a name of the student's own that holds its value)."""
    stub = next((e for e in errors if "NotImplementedError" in e["error"]), None)
    if stub:
        return (
            f"{name} is not defined: {stub['cell']} raised {stub['error']} at line {stub['line']} "
            "(is the `raise NotImplementedError()` stub still there?)"
        )
    if renamed:
        return f"{name} is not defined, but `{renamed}` holds exactly its value: name it `{name}`"
    # another gradient's name is not a misspelling of this one
    candidates = [x for x in names if x != name and x.startswith("d") and x not in GRADIENT_NAMES]
    similar = difflib.get_close_matches(name, candidates, n=2, cutoff=0.75)
    if similar:
        listed = " or ".join(f"`{s}`" for s in similar)
        return f"{name} is not defined; your notebook defines {listed}: if that is {name}, name it `{name}`"
    stopped = errors[0] if errors else None
    if stopped:
        return f"{name} is not defined: {stopped['cell']} raised {stopped['error']} at line {stopped['line']}"
    return f"{name} is not defined: assign it in the answer cell"
