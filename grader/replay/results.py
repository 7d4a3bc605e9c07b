"""A replay run's result, checked before the judge computes anything with it.

The replay is untrusted: a run that replaces its writer can send any bytes. A result is
one frame (grader/untrusted/server.py's encode_frame; grader/untrusted/protocol.py defines it): a
RunRecord as JSON, then the tensors. Here the
frame's size, the meta record's schema and the tensor archive's layout are checked first;
only then does torch unpickle it (plain tensors only), and each tensor must be a plain,
compact float32 tensor of a shape the judge expects for its key. A malformed frame costs its
run only; a bad tensor costs its key only, with the reason in the verdict.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace

import torch

from ..exercise import spec
from ..exercise.compare import MISSING, Foreign, Unusable
from ..exercise.graded import GradedExercise
from ..settings import (
    MAX_ALIASES,
    MAX_CPU,
    MAX_ERRORS,
    MAX_EVENT_CHARS,
    MAX_META_BYTES,
    MAX_N_AT,
    MAX_N_AT_CHARS,
    MAX_NAMES,
    MAX_STR,
)
from ..untrusted.protocol import (
    EVENT_KINDS,
    EX4,
    MAX_EVENTS,
    MAX_FRAME_BYTES,
    MAX_OWN,
    META_HEADER,
    OWN,
    STATUS_OK,
    TRAINED,
    VALUE_KINDS,
    RunRecord,
    local_gradients,
    parse_value_key,
    run_name_local,
    value_key,
)
from .tensors import MAX_NAME, BadFrame, Expect, load_tensors

EX1_CELL = spec.ANSWER_CELLS[1]


def expected_shapes(fresh, exercise: GradedExercise = spec.NINJA) -> dict[str, Expect]:
    """Every key a run may return, from the judge's own references (the exercise names them).
    `fresh`: grader/reference/inputs.py's FreshInputs."""
    # A wrong-axis sum or a missing sum is no bigger than its forward pass's largest tensor
    # (db2 summed over the batch is (32,) for (27,)): room enough for every shape hint.
    room = {
        trains: max((t.numel() for t in v.values() if isinstance(t, torch.Tensor)), default=0)
        for trains, v in ((False, fresh.values), (True, fresh.ex4_inputs))
    }
    out: dict[str, Expect] = {}
    for g in exercise.gradients:
        trains = exercise.trains(g)
        ref = (fresh.ex4_reference if trains else fresh.grads)[g.target]
        expect = Expect(tuple(ref.shape), False, max(ref.numel(), room[trains]))
        if trains:
            out[value_key(EX4, g.name)] = expect
            continue
        out[value_key(exercise.answer_cell(g.exercise), g.name)] = expect
        out[value_key(None, g.name)] = expect  # the per-gradient runs and the in-one-go runs name it bare
    for i in range(MAX_OWN):  # a rename's tensor: the judge compares its shape itself
        out[value_key(OWN, str(i))] = Expect((), False, room[False])
    for k, t in fresh.train.items():  # the replay's own loop shapes them: exactly
        if k in exercise.definition.params:
            out[value_key(TRAINED, k)] = Expect(tuple(t.shape), True, t.numel())
    return out


@dataclass
class RunResult:
    """One run as the judge sees it: its status, its validated record and tensors."""

    status: str
    meta: RunRecord = field(default_factory=dict)
    tensors: dict = field(default_factory=dict)
    rejected: dict[str, str] = field(default_factory=dict)  # key -> why its tensor was refused
    cpu: float | None = None  # the run's CPU seconds, counted by the kernel (not by the run)
    pace: float | None = None  # the pace work's CPU seconds around the run (grader/exercise/pace.py)
    by: str | None = None  # not made: the earlier run whose values stand for it (verdicts/settled.py)

    def value(self, key: str):
        if key in self.rejected:
            return Unusable(parse_value_key(key)[1], self.rejected[key])
        info = self.meta.get("values", {}).get(key)
        if info is None or info["kind"] == "missing":
            return MISSING
        if info["kind"] == "none":
            return None
        if info["kind"] == "other":
            return Foreign(info.get("type", "?"))
        return self.tensors.get(key, MISSING)


def parse_frame(
    frame: bytes | None,
    status: str,
    expected: dict[str, Expect],
    cpu: float | None = None,
    pace: float | None = None,
) -> RunResult:
    """The run's result, or a RunResult without values that says why there is none."""
    if not frame:
        return RunResult(
            status if status != STATUS_OK else "ended without a result (exit or crash)", cpu=cpu, pace=pace
        )
    try:
        meta, blob = split_frame(frame)
        meta = check_meta(meta, expected)
        tensors, rejected = load_tensors(blob, expected)
    except Exception as e:  # anything unforeseen in untrusted bytes costs this run, not the batch
        reason = str(e) if isinstance(e, BadFrame) else f"unreadable: {type(e).__name__}"
        return RunResult(
            status if status != STATUS_OK else f"returned an unusable result ({reason})", cpu=cpu, pace=pace
        )
    return RunResult(status, meta, tensors, rejected, cpu, pace)


def each_gradients(run: str, result: RunResult) -> dict[str, RunResult]:
    """A joint own-rule run ("local:dX+dY", plan.joint_runs) as the runs it stands for, each
    with its own gradient's value and everything else the run gave; any other run as it is."""
    gradients = local_gradients(run)
    if len(gradients) < 2:
        return {run: result}
    return {run_name_local(g): gradients_own_values(result, g) for g in gradients}


def stand_ins(run: str, result: RunResult, by: str) -> dict[str, RunResult]:
    """An own-rule run that was not made, as the runs it stands for: each gradient's values
    from `result`, the run `by` that was made and answered for it."""
    return {run_name_local(g): replace(gradients_own_values(result, g), by=by) for g in local_gradients(run)}


def gradients_own_values(result: RunResult, gradient: str) -> RunResult:
    """`result` as `gradient`'s own-rule run gives it: that gradient's value, the student's own
    names (a rename's candidates) and everything else the run said."""

    def keep(key: str) -> bool:
        return key == gradient or parse_value_key(key)[0] == OWN

    values = {k: v for k, v in result.meta.get("values", {}).items() if keep(k)}
    return replace(
        result,
        meta={**result.meta, "values": values} if result.meta else {},
        tensors={k: t for k, t in result.tensors.items() if keep(k)},
        rejected={k: why for k, why in result.rejected.items() if keep(k)},
    )


def split_frame(frame: bytes) -> tuple[bytes, bytes]:
    if not isinstance(frame, (bytes, bytearray)) or not META_HEADER.size <= len(frame) <= MAX_FRAME_BYTES:
        raise BadFrame(f"not a frame of {META_HEADER.size} to {MAX_FRAME_BYTES} bytes")
    (n,) = META_HEADER.unpack_from(frame)
    start = META_HEADER.size
    if n > MAX_META_BYTES or start + n > len(frame):
        raise BadFrame("the meta record's length is wrong")
    return bytes(frame[start : start + n]), bytes(frame[start + n :])


# ------------------------------------------------------------ the meta record
def _is(v, where: str, ok: bool, what: str):
    if not ok:
        raise BadFrame(f"{where} is not {what}")
    return v


def _str(v, where: str, limit: int = MAX_STR, optional: bool = False) -> str | None:
    return None if v is None and optional else _is(v, where, type(v) is str, "a string")[:limit]


def _name(v, where: str) -> str:
    return _str(v, where, MAX_NAME)


def _identifier(v, where: str) -> str:
    name = _name(v, where)
    return _is(name, where, name == v and name.isidentifier(), "a Python name")


def _list(v, where: str, limit: int, item) -> list:
    return [item(x, f"{where}[{i}]") for i, x in enumerate(_is(v, where, type(v) is list, "a list")[:limit])]


def _dict(v, where: str) -> dict:
    return _is(v, where, type(v) is dict, "an object")


def _value_info(v, where: str) -> dict:
    v = _dict(v, where)
    kind = _is(v.get("kind"), f"{where}.kind", v.get("kind") in VALUE_KINDS, f"one of {VALUE_KINDS}")
    return {"kind": kind, **({"type": _name(v["type"], where)} if "type" in v else {})}


def _error(v, where: str) -> dict:
    v = _dict(v, where)
    line = v.get("line")
    return {
        "cell": _name(v.get("cell", ""), where),
        "error": _str(v.get("error", ""), where),
        "line": _is(line, where, line is None or type(line) is int, "a line number"),
        "assigns": _list(v.get("assigns", []), where, MAX_NAMES, _name),
    }


def _event(v, where: str) -> dict:
    v = _dict(v, where)
    line = v.get("line")
    return {
        "kind": _is(v.get("kind"), f"{where}.kind", v.get("kind") in EVENT_KINDS, f"one of {EVENT_KINDS}"),
        "what": _str(v.get("what", ""), where, MAX_EVENT_CHARS),
        "cell": _name(v.get("cell", ""), where),
        "line": _is(line, where, line is None or type(line) is int, "a line number"),
    }


def _pair(v, where: str) -> list[str]:
    _is(v, where, type(v) is list and len(v) == 2, "a pair of names")
    return [_name(v[0], where), _name(v[1], where)]


# A check for each RunRecord field but `values` (checked against the expected keys): the
# judge reads nothing else (grader/untrusted/runner.py writes them); any other key is dropped.
SCHEMA = {
    "names": lambda v, w: _list(v, w, MAX_NAMES, _name),
    "own": lambda v, w: _list(v, w, MAX_OWN, _identifier),
    "aliases": lambda v, w: _list(v, w, MAX_ALIASES, _pair),
    "n_at": lambda v, w: {
        _name(k, w): (v[k] if type(v[k]) in (int, bool) else _str(v[k], w, MAX_N_AT_CHARS))
        for k in list(_dict(v, w))[:MAX_N_AT]
    },
    "errors": lambda v, w: _list(v, w, MAX_ERRORS, _error),
    "ex4_error": lambda v, w: _str(v, w, optional=True),
    "train_error": lambda v, w: _str(v, w, optional=True),
    "seconds": lambda v, w: _is(v, w, type(v) is float and 0 <= v < 1e9, "a duration"),  # perf_counter's
    "partial": lambda v, w: _is(v, w, type(v) is bool, "true or false"),
    "autograd": lambda v, w: _list(v, w, MAX_EVENTS, _event),
    "cpu": lambda v, w: {
        _name(k, w): _is(v[k], w, type(v[k]) is float and 0 <= v[k] < 1e6, "CPU seconds")
        for k in list(_dict(v, w))[:MAX_CPU]
    },
}


assert set(SCHEMA) | {"values"} == set(RunRecord.__annotations__), "a RunRecord field has no check"


def check_meta(raw: bytes, expected: dict[str, Expect]) -> RunRecord:
    """The meta record, parsed and checked against SCHEMA; `values` only for known keys."""
    try:
        meta = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise BadFrame(f"the meta record is not JSON: {type(e).__name__}") from None
    meta = _dict(meta, "the meta record")
    out = {k: check(meta[k], k) for k, check in SCHEMA.items() if k in meta}
    values = _dict(meta.get("values", {}), "values")
    out["values"] = {k: _value_info(values[k], f"values[{k}]") for k in expected if k in values}
    return out
