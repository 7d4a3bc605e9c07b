"""The tensors of a replay run's result, read with bounds before torch sees them: the zip
archive's entries (count, sizes, compression, inflation), then torch unpickles a skeleton onto
the meta device, and each tensor must be a plain, compact float32 tensor of an expected shape.
"""

from __future__ import annotations

import io
import math
import zipfile
import zlib
from dataclasses import dataclass

import torch

from ..settings import MAX_ENTRY_BYTES, MAX_NAME, MAX_NDIM, MAX_PICKLE_BYTES
from ..untrusted.protocol import MAX_FRAME_BYTES

ARCHIVE_OVERHEAD = 8  # torch.save's entries besides one per tensor


class BadFrame(ValueError):
    """The whole frame is unusable."""


@dataclass(frozen=True)
class Expect:
    """What the judge accepts under one key."""

    shape: tuple[int, ...]
    exact: bool  # trained parameters: exactly `shape`; gradients: also near misses hints explain
    limit: int  # the most elements accepted

    def fits(self, shape: tuple[int, ...]) -> bool:
        if shape == self.shape:
            return True
        return not self.exact and len(shape) <= MAX_NDIM and math.prod(shape) <= self.limit


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
            continue  # nothing the judge reads
        reason = tensor_problem(t, expected[key])
        name = (
            offsets.get(getattr(t.untyped_storage(), "_checkpoint_offset", None)) if reason is None else None
        )
        if reason is None and (name not in records or len(records[name]) != 4 * t.numel()):
            reason = f"{describe(t)}, whose data {bad.get(name, 'is missing or of another size')}"
        elif reason is None and t.numel() and name in owners:
            reason = f"shares its memory with {owners[name]}"
        if reason:
            rejected[key] = reason
            continue
        owners[name] = key
        data = bytearray(records[name])
        tensors[key] = (
            torch.frombuffer(data, dtype=torch.float32).reshape(t.shape) if data else torch.empty(t.shape)
        )
    return tensors, rejected


def _entries(blob: bytes, most: int) -> tuple[dict[str, bytes], dict[str, str]]:
    """The archive's entries, each read with a bound: (name -> bytes, name -> why unusable)."""
    # zipfile lists every entry before we can count them: each starts with this signature
    if blob.count(b"PK\x01\x02") > most:
        raise BadFrame(f"the tensor archive has more than {most} entries")
    src = zipfile.ZipFile(io.BytesIO(blob))  # not a zip: parse_frame names the error
    records, bad, left = {}, {}, MAX_FRAME_BYTES
    for info in src.infolist():
        name = info.filename
        if len(name) > MAX_NAME or name in records or name in bad:
            raise BadFrame(f"the tensor archive's entry {name[:MAX_NAME]!r} is repeated or too long")
        data = _read(
            src, info, MAX_PICKLE_BYTES if name.endswith("/data.pkl") else min(MAX_ENTRY_BYTES, left)
        )
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
            data = f.read(limit + 1)  # the CRC is checked when the end is read
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
                continue  # with it torch computes offsets for its own writer's layout
            start = out.tell()
            z.writestr(name, b"" if "/data/" in name or name in bad else records[name])
            offsets[start + 30 + len(name.encode())] = name  # a local header: 30 bytes, the name
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
        size = t.untyped_storage().nbytes()
        return f"{describe(t)}, not a compact tensor of its own ({size} bytes of storage)"
    if t.requires_grad or t.is_conj() or t.is_neg():
        return f"{describe(t)} with autograd or view flags"
    if not expect.fits(tuple(t.shape)):
        return f"{describe(t)}, expected {tuple(expect.shape)}"
    return None
