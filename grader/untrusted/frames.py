"""A run's results on their way to the server: encoded as frames (protocol.py's), sent on the
run's own pipe with their size, read back bounded (every byte counted, a frame over the limit
refused, the last complete frame kept), and the run's end told as a status. Used in the sandbox
by the server and a run group (server.py, run_group.py); no student code runs here."""

from __future__ import annotations

import io
import json
import os
import select
import signal
import struct
import time

import torch

from .protocol import MAX_FRAME_BYTES, META_HEADER, STATUS_OK, RunRecord, timed_out

FRAME_HEADER = struct.Struct(">Q")  # a run's pipe to the server: size, then the frame
MAX_RUN_BYTES = 4 * MAX_FRAME_BYTES  # all a run may send (checkpoints included)


def encode_frame(record: RunRecord, tensors: dict[str, torch.Tensor]) -> bytes:
    """One result (protocol.py's frame): the record as JSON, then the tensors as torch.save
    writes them."""
    blob = io.BytesIO()
    torch.save(tensors, blob)
    meta_json = json.dumps(record, default=str).encode()
    return META_HEADER.pack(len(meta_json)) + meta_json + blob.getvalue()


def send_frame(channel: int, record: RunRecord, tensors: dict) -> None:
    frame = encode_frame(record, tensors)
    write_all(channel, FRAME_HEADER.pack(len(frame)) + frame)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def collect(pid: int, results: int, timeout: float) -> tuple[str, bytes | None]:
    """Read frames until the run's child has exited and its pipe is closed, or the time is up.
    Keeps the last complete frame; a run that sends too much is stopped."""
    deadline = time.monotonic() + timeout
    buf, last, total, status, eof = bytearray(), None, 0, None, False
    while True:
        if status is None:
            done, raw = os.waitpid(pid, os.WNOHANG)
            if done:
                code = os.WEXITSTATUS(raw) if os.WIFEXITED(raw) else 128 + os.WTERMSIG(raw)
                status = status_of(code)
                deadline = min(deadline, time.monotonic() + 2.0)  # the pipe closes with the namespace
        if status is not None and eof:
            return status, last
        if time.monotonic() > deadline:
            return status or timed_out(timeout), last
        ready, _, _ = select.select([results], [], [], 0.01)
        if ready and not eof:
            chunk = os.read(results, 1 << 20)
            eof = not chunk
            total += len(chunk)
            if total > MAX_RUN_BYTES:
                return f"stopped: the run sent more than {MAX_RUN_BYTES} bytes", last
            buf += chunk
            last, buf = last_frame(buf, last)
            if last is TOO_BIG:
                return f"stopped: a result over {MAX_FRAME_BYTES} bytes", None


TOO_BIG = b""


def status_of(code: int) -> str:
    return STATUS_OK if code == 0 else (f"killed by signal {code - 128}" if code > 128 else f"exit {code}")


def last_frame(buf: bytearray, last):
    while len(buf) >= FRAME_HEADER.size:
        (size,) = FRAME_HEADER.unpack_from(buf)
        if size > MAX_FRAME_BYTES:
            return TOO_BIG, buf
        if len(buf) < FRAME_HEADER.size + size:
            break
        last = bytes(buf[FRAME_HEADER.size : FRAME_HEADER.size + size])
        del buf[: FRAME_HEADER.size + size]
    return last, buf
