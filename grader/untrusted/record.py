"""What crosses the trust boundary, both ways, defined once and imported by both sides:
the plan and inputs the judge hands a replay run, and the record a run sends back.

The judge (grader/replay/results.py) validates every RunRecord field against these types
before it uses anything; a key that is not declared here is dropped.
"""

from __future__ import annotations

import io
import json
import struct
from typing import Literal, TypedDict

import torch

FRAME_HEADER = struct.Struct(">Q")  # a run's pipe to the server: size, then the frame
META_HEADER = struct.Struct(">I")  # inside a frame: size of the JSON record
MAX_FRAME_BYTES = 16 * 1024 * 1024  # an honest run's result is well under 1 MB
MAX_RUN_BYTES = 4 * MAX_FRAME_BYTES  # all a run may send (checkpoints included)


# ------------------------------------------------------------ judge -> run
class PlanCell(TypedDict):
    label: str
    kind: Literal["locked", "answer", "added"]
    grade_id: str | None
    source: str
    seeded: bool  # the judge changed it: it depends on the submission's seed


class ReplayPlan(TypedDict):
    """WORK/plan.json: the cells and how to run them."""

    cells: list[PlanCell]
    first_answer: int  # cells before it are the setup, run once per run
    data_dir: str  # holds the trusted names.txt; the run's current folder
    train_seed: int  # exercise 4's training batches
    train_steps: int
    statement_seconds: float  # one statement of the student's; past it, the next one runs
    run_tmp_mb: int  # the run's private /tmp and /dev/shm


class RunInputs(TypedDict):
    """WORK/inputs.pt and WORK/inject.pt: tensors only (loaded with weights_only)."""

    ex4: dict[str, torch.Tensor]  # one forward pass's values, spec.EX4_ARGUMENTS
    train: dict[str, torch.Tensor]  # start parameters (spec.PARAMETERS), Xtr and Ytr
    inject: dict[str, torch.Tensor]  # exactly the correct values this run is handed


# ------------------------------------------------------------ run -> judge
class ValueInfo(TypedDict, total=False):
    kind: Literal["missing", "none", "other", "tensor"]  # a tensor travels in the archive
    type: str  # "other": the value's type name


class RunError(TypedDict):
    cell: str
    line: int | None
    error: str  # "ExcType: message", cut at 300 characters
    assigns: list[str]  # names the failed statement would have set


class AutogradEvent(TypedDict):
    """autograd_guard.py: the student's code reached for autograd, or worked around the guard."""

    kind: Literal["call", "bypass", "tamper", "refused"]
    what: str  # "torch.autograd.grad", "the autograd engine", "sys.setprofile", ...
    cell: str  # the cell and line of the statement that did it
    line: int | None


class RunRecord(TypedDict, total=False):
    """The JSON part of a run's result; tensors travel beside it, under the keys of `values`."""

    values: dict[str, ValueInfo]  # "<answer cell>/<name>", "<name>", "ex4/<dparam>"
    names: list[str]  # the main run's global names (for "is it misspelt?" hints)
    aliases: list[list[str]]  # pairs of names bound to one tensor
    n_at: dict[str, int | str]  # `n` when each answer cell ran
    errors: list[RunError]
    ex4_error: str | None
    train_error: str | None
    seconds: float
    partial: bool  # a checkpoint: the run went on after it
    autograd: list[AutogradEvent]  # in order; at most autograd_guard.MAX_EVENTS
    cpu: dict[str, float]  # CPU seconds by cell label, spec.EX4_FUNCTION and "training"


def encode_frame(record: RunRecord, tensors: dict[str, torch.Tensor]) -> bytes:
    """One result: the record as JSON, then the tensors as torch.save writes them."""
    blob = io.BytesIO()
    torch.save(tensors, blob)
    meta_json = json.dumps(record, default=str).encode()
    return META_HEADER.pack(len(meta_json)) + meta_json + blob.getvalue()
