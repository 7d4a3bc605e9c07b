"""A replay run's result, checked before the judge computes anything with it.

The replay is untrusted: a run that replaces its writer can send any bytes. A result is
one frame, `struct.pack(">I", len(meta_json)) + meta_json + torch.save(tensors)`. Here the
frame's size, the meta record's schema and the tensor archive's layout are checked first;
only then does torch unpickle it (plain tensors only), and each tensor must be a plain,
compact float32 tensor of a shape the judge expects for its key. A malformed frame costs its
run only; a bad tensor costs its key only, with the reason in the verdict.
"""
from __future__ import annotations

import io
import json
import math
import struct
import zipfile
import zlib
from dataclasses import dataclass, field

import torch

from . import spec
from .compare import MISSING, Foreign
from .replay_server import MAX_FRAME_BYTES  # the protocol's bound, defined where frames are made

MAX_META_BYTES = 2 * 1024 * 1024
MAX_PICKLE_BYTES = 256 * 1024        # the archive's index of tensors: a few kB when honest
MAX_ENTRY_BYTES = 8 * 1024 * 1024    # one tensor: a too-big one is refused by key, not by frame
ARCHIVE_OVERHEAD = 8                 # torch.save's entries besides one per tensor
MAX_STR = 1000                       # the replay cuts its own messages at 300
MAX_NAME = 200
MAX_NAMES, MAX_ERRORS, MAX_ALIASES, MAX_N_AT = 2000, 1000, 200, 16
MAX_NDIM = 4
KINDS = ("missing", "none", "other", "tensor")


class BadFrame(ValueError):
    """The whole frame is unusable."""


@dataclass(frozen=True)
class Expect:
    """What the judge accepts under one key."""
    shape: tuple[int, ...]
    exact: bool       # trained parameters: exactly `shape`; gradients: also near misses hints explain
    limit: int        # the most elements accepted

    def fits(self, shape: tuple[int, ...]) -> bool:
        if shape == self.shape:
            return True
        return not self.exact and len(shape) <= MAX_NDIM and math.prod(shape) <= self.limit


def expected_shapes(grads: dict, values: dict, ex4_reference: dict, ex4_inputs: dict,
                    train: dict) -> dict[str, Expect]:
    """Every key a run may return, from the judge's own references (spec.py names them)."""
    # A wrong-axis sum or a missing sum is no bigger than its forward pass's largest tensor
    # (db2 summed over the batch is (32,) for (27,)): room enough for every shape hint.
    room = {ex: max(t.numel() for t in v.values() if isinstance(t, torch.Tensor))
            for ex, v in ((1, values), (4, ex4_inputs))}
    out: dict[str, Expect] = {}
    for g in spec.GRADIENTS:
        ref = (ex4_reference if g.exercise == 4 else grads)[g.target]
        expect = Expect(tuple(ref.shape), False, max(ref.numel(), room[4 if g.exercise == 4 else 1]))
        if g.exercise == 4:
            out[f"ex4/{g.name}"] = expect
            continue
        out[f"{spec.ANSWER_CELLS[g.exercise]}/{g.name}"] = expect
        out[g.name] = expect      # the per-gradient runs and exercise 3's run name it bare
    for k in spec.EX4_PARAMETERS:   # the replay's own loop shapes them: exactly
        out[f"train/{k}"] = Expect(tuple(train[k].shape), True, train[k].numel())
    return out


class Unusable(Foreign):
    """A tensor the replay returned that the judge will not compute with."""
    def __init__(self, name: str, reason: str):
        super().__init__(f"an unusable tensor: {reason}")
        self.message = f"the replay returned an unusable value for {name}: {reason}"


@dataclass
class RunResult:
    status: str
    meta: dict = field(default_factory=dict)
    tensors: dict = field(default_factory=dict)
    rejected: dict[str, str] = field(default_factory=dict)   # key -> why its tensor was refused

    def value(self, key: str):
        if key in self.rejected:
            return Unusable(key.rpartition("/")[2], self.rejected[key])
        info = self.meta.get("values", {}).get(key)
        if info is None or info["kind"] == "missing":
            return MISSING
        if info["kind"] == "none":
            return None
        if info["kind"] == "other":
            return Foreign(info.get("type", "?"))
        return self.tensors.get(key, MISSING)


def parse_frame(frame: bytes | None, status: str, expected: dict[str, Expect]) -> RunResult:
    """The run's result, or a RunResult without values that says why there is none."""
    if not frame:
        return RunResult(status if status != "ok" else "ended without a result (exit or crash)")
    try:
        meta, blob = split_frame(frame)
        meta = check_meta(meta, expected)
        tensors, rejected = load_tensors(blob, expected)
    except Exception as e:  # anything unforeseen in untrusted bytes costs this run, not the batch
        reason = str(e) if isinstance(e, BadFrame) else f"unreadable: {type(e).__name__}"
        return RunResult(status if status != "ok" else f"returned an unusable result ({reason})")
    return RunResult(status, meta, tensors, rejected)


def split_frame(frame: bytes) -> tuple[bytes, bytes]:
    if not isinstance(frame, (bytes, bytearray)) or not 4 <= len(frame) <= MAX_FRAME_BYTES:
        raise BadFrame(f"not a frame of 4 to {MAX_FRAME_BYTES} bytes")
    (n,) = struct.unpack(">I", frame[:4])
    if n > MAX_META_BYTES or 4 + n > len(frame):
        raise BadFrame("the meta record's length is wrong")
    return bytes(frame[4:4 + n]), bytes(frame[4 + n:])


# ------------------------------------------------------------ the meta record
def _is(v, where: str, ok: bool, what: str):
    if not ok:
        raise BadFrame(f"{where} is not {what}")
    return v


def _str(v, where: str, limit: int = MAX_STR, optional: bool = False) -> str | None:
    return None if v is None and optional else _is(v, where, type(v) is str, "a string")[:limit]


def _name(v, where: str) -> str:
    return _str(v, where, MAX_NAME)


def _list(v, where: str, limit: int, item) -> list:
    return [item(x, f"{where}[{i}]") for i, x in enumerate(_is(v, where, type(v) is list, "a list")[:limit])]


def _dict(v, where: str) -> dict:
    return _is(v, where, type(v) is dict, "an object")


def _value_info(v, where: str) -> dict:
    v = _dict(v, where)
    kind = _is(v.get("kind"), f"{where}.kind", v.get("kind") in KINDS, f"one of {KINDS}")
    return {"kind": kind, **({"type": _name(v["type"], where)} if "type" in v else {})}


def _error(v, where: str) -> dict:
    v = _dict(v, where)
    line = v.get("line")
    return {"cell": _name(v.get("cell", ""), where), "error": _str(v.get("error", ""), where),
            "line": _is(line, where, line is None or type(line) is int, "a line number"),
            "assigns": _list(v.get("assigns", []), where, MAX_NAMES, _name)}


def _pair(v, where: str) -> list[str]:
    _is(v, where, type(v) is list and len(v) == 2, "a pair of names")
    return [_name(v[0], where), _name(v[1], where)]


# The keys the judge reads (grader/replay.py's Runner.run writes them); any other is dropped.
SCHEMA = {
    "names": lambda v, w: _list(v, w, MAX_NAMES, _name),
    "aliases": lambda v, w: _list(v, w, MAX_ALIASES, _pair),
    "n_at": lambda v, w: {_name(k, w): (v[k] if type(v[k]) in (int, bool) else _str(v[k], w, 40))
                          for k in list(_dict(v, w))[:MAX_N_AT]},
    "errors": lambda v, w: _list(v, w, MAX_ERRORS, _error),
    "ex4_error": lambda v, w: _str(v, w, optional=True),
    "train_error": lambda v, w: _str(v, w, optional=True),
    "seconds": lambda v, w: _is(v, w, type(v) is float and 0 <= v < 1e9, "a duration"),  # perf_counter's
    "partial": lambda v, w: _is(v, w, type(v) is bool, "true or false"),
}


def check_meta(raw: bytes, expected: dict[str, Expect]) -> dict:
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


# ------------------------------------------------------------ the tensors
def load_tensors(blob: bytes, expected: dict[str, Expect]) -> tuple[dict, dict]:
    """(tensors, rejected): the usable tensors by key, and why each other known key was refused.
    torch unpickles onto the meta device (shapes and sizes, no data); a tensor that passes is
    then built from its own record, which was read here with a bound."""
    if not blob:
        return {}, {}
    records, bad = _entries(blob, len(expected) + ARCHIVE_OVERHEAD)
    skeleton, offsets = _skeleton(records, bad)
    try:
        obj = torch.load(io.BytesIO(skeleton), weights_only=True, map_location="meta")
    except Exception as e:  # weights_only refuses anything but plain data: the run's fault
        raise BadFrame(f"the tensors do not load: {type(e).__name__}") from None
    if type(obj) is not dict:
        raise BadFrame("the tensors are not a dict")
    tensors, rejected, owners = {}, {}, {}
    for key, t in obj.items():
        if not isinstance(key, str) or key not in expected:
            continue              # nothing the judge reads
        reason = tensor_problem(t, expected[key])
        name = offsets.get(getattr(t.untyped_storage(), "_checkpoint_offset", None)) if reason is None else None
        if reason is None and (name not in records or len(records[name]) != 4 * t.numel()):
            reason = f"{describe(t)}, whose data {bad.get(name, 'is missing or of another size')}"
        elif reason is None and t.numel() and name in owners:
            reason = f"shares its memory with {owners[name]}"
        if reason:
            rejected[key] = reason
            continue
        owners[name] = key
        data = bytearray(records[name])
        tensors[key] = torch.frombuffer(data, dtype=torch.float32).reshape(t.shape) if data else torch.empty(t.shape)
    return tensors, rejected


def _entries(blob: bytes, most: int) -> tuple[dict[str, bytes], dict[str, str]]:
    """The archive's entries, each read with a bound: (name -> bytes, name -> why unusable)."""
    # zipfile lists every entry before we can count them: each starts with this signature
    if blob.count(b"PK\x01\x02") > most:
        raise BadFrame(f"the tensor archive has more than {most} entries")
    src = zipfile.ZipFile(io.BytesIO(blob))      # not a zip: parse_frame names the error
    records, bad, left = {}, {}, MAX_FRAME_BYTES
    for info in src.infolist():
        name = info.filename
        if len(name) > MAX_NAME or name in records or name in bad:
            raise BadFrame(f"the tensor archive's entry {name[:MAX_NAME]!r} is repeated or too long")
        data = _read(src, info, MAX_PICKLE_BYTES if name.endswith("/data.pkl") else min(MAX_ENTRY_BYTES, left))
        if isinstance(data, str):
            bad[name] = data
        else:
            records[name], left = data, left - len(data)
    if index := next((why for k, why in bad.items() if k.endswith("/data.pkl")), None):
        raise BadFrame(f"the tensor archive's index {index}")
    if next((v for k, v in records.items() if k.endswith("/byteorder")), b"little") != b"little":
        raise BadFrame("the tensor archive is not little-endian")
    return records, bad


def _read(src: zipfile.ZipFile, info: zipfile.ZipInfo, limit: int) -> bytes | str:
    """An entry's bytes, or why not. torch.save does not compress, but torch.load would inflate
    without bound: here inflating stops at `limit`, so a deflate bomb costs its own tensors."""
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        return "is compressed in a way torch.save never writes"
    try:
        with src.open(info) as f:
            data = f.read(limit + 1)      # the CRC is checked when the end is read
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, RuntimeError, ValueError) as e:
        return f"is unreadable ({type(e).__name__})"
    return data if len(data) <= limit else f"is over {limit} bytes"


def _skeleton(records: dict[str, bytes], bad: dict[str, str]) -> tuple[bytes, dict[int, str]]:
    """What torch unpickles: the archive with every tensor's record emptied (map_location="meta"
    reads none), and where each record starts, which the meta storages carry."""
    out, offsets = io.BytesIO(), {}
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
        for name in [*records, *bad]:
            if name.endswith("/.format_version"):
                continue      # with it torch computes offsets for its own writer's layout
            start = out.tell()
            z.writestr(name, b"" if "/data/" in name or name in bad else records[name])
            offsets[start + 30 + len(name.encode())] = name   # a local header: 30 bytes, the name
    return out.getvalue(), offsets


def describe(t: torch.Tensor) -> str:
    return f"{str(t.dtype).removeprefix('torch.')} {tuple(t.shape)}"[:MAX_NAME]


def tensor_problem(t, expect: Expect) -> str | None:
    """Why the judge will not compute with `t` (a meta tensor: shapes and sizes only), or None."""
    if type(t) is not torch.Tensor:
        return f"a {type(t).__name__[:MAX_NAME]}, not a plain tensor"
    if t.layout != torch.strided or t.is_quantized:
        return f"a {t.layout} tensor"
    if t.dtype != torch.float32:
        return describe(t)
    # an expanded view or a slice of a bigger storage is small on disk and huge in use
    if not t.is_contiguous() or t.storage_offset() != 0 or t.untyped_storage().nbytes() != 4 * t.numel():
        return f"{describe(t)}, not a compact tensor of its own ({t.untyped_storage().nbytes()} bytes of storage)"
    if t.requires_grad or t.is_conj() or t.is_neg():
        return f"{describe(t)} with autograd or view flags"
    if not expect.fits(tuple(t.shape)):
        return f"{describe(t)}, expected {tuple(expect.shape)}"
    return None
