"""What crosses the trust boundary, both ways, defined once: the one module of grader/untrusted/
the trusted side imports (a unit test checks), and it imports only the standard library, so
importing it runs nothing of the untrusted side (no torch, no guard, no os._exit captured).

- the replay: the files the judge writes for a run (PLAN_FILE, INPUTS_FILE, INJECT_FILE), the
  plan and inputs in them, the server's messages (ServerHello, RunRequest, AnswerHeader), the
  runs by name (AS_SUBMITTED, EX3, run_name_local), the autograd guard's modes (BLOCK, WATCH,
  OPEN), the statuses the judge compares (STATUS_OK, STATUS_TIMED_OUT), the record a run sends
  back (RunRecord) and the names of its values (value_key), inside a frame of at most
  MAX_FRAME_BYTES;
- the autograde kernel: where the sandbox shows the submission and the socket folder, and the
  connection file's name (SUBMISSION_INSIDE, IPC_INSIDE, KERNEL_CONNECTION_FILE), and what the
  warm kernel server is asked (KernelStart).

The judge (grader/replay/results.py) validates every RunRecord field against these types
before it uses anything; a key that is not declared here is dropped. Nothing here is trusted
because it is shared: it only names things.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Literal, TypedDict

if TYPE_CHECKING:  # annotations only: importing the protocol imports no torch
    import torch

# ------------------------------------------------------------ the runs, by name
AS_SUBMITTED = "main"  # the student's notebook as it is, on the fresh inputs
EX3 = "ex3"  # exercise 3's answer cell, handed the correct dhpreact
LOCAL = "local"  # "local:dX": dX on the student's own rule, handed every upstream gradient


def run_name_local(*gradients: str) -> str:
    """The run that judges `gradients` ("dX", ...) on their own rules: "local:dX", or
    "local:dX+dY" for gradients handed the same upstream gradients (one run gives each)."""
    return f"{LOCAL}:{'+'.join(gradients)}"


def local_gradients(run: str) -> list[str]:
    """The gradients a "local:..." run keeps ([] for any other run)."""
    kind, gradients = parse_run_name(run)
    return gradients.split("+") if kind == LOCAL else []


def parse_run_name(run: str) -> tuple[str, str]:
    """(kind, gradient): ("main", ""), ("ex3", ""), ("local", "dX"), ("local", "dX+dY")."""
    kind, _, gradient = run.partition(":")
    return kind, gradient


# ------------------------------------------------------------ the values a run returns, by key
def batch_key(i: int, name: str) -> str:
    """A written exercise's training batch i's tensor `name`, in RunInputs.train."""
    return f"batch{i}/{name}"


EX4 = "ex4"  # exercise 4's gradients, as manual_backward returned them: "ex4/dX"
TRAINED = "train"  # the parameters after the replay's training loop: "train/X"
TRAINING_CPU = "training"  # RunRecord.cpu's key for that loop (beside cell labels, spec.EX4_FUNCTION)
# Tensors of the student's own names, from the main run's exercise-1 cell, the shape of a gradient
# it left unassigned (a rename, told by its value): "own/0", "own/1", ..., named in RunRecord.own
OWN, MAX_OWN = "own", 8


def value_key(where: str | None, name: str) -> str:
    """Where a run keeps a value: "<answer cell>/<name>" (the notebook's run, a snapshot of that
    cell), "ex4/<dX>" (EX4), "train/<X>" (TRAINED); bare "<name>" (`where` None) in the runs
    that stop after one cell ("local:dX" and "ex3")."""
    return f"{where}/{name}" if where else name


def parse_value_key(key: str) -> tuple[str | None, str]:
    """(where, name) of value_key(where, name)."""
    where, _, name = key.rpartition("/")
    return where or None, name


# ------------------------------------------------------------ autograd in a run
# autograd_guard.py's modes: unavailable (the runs that decide grades), as torch ships in the
# runs that only explain ("watch") and under the "flag" policy ("open")
BLOCK, WATCH, OPEN = "block", "watch", "open"
GUARD_MODES = (BLOCK, WATCH, OPEN)
MAX_EVENTS = 50  # AutogradEvents a run reports
EVENT_KINDS = ("call", "bypass", "tamper", "refused")

# ------------------------------------------------------------ a run's status, as the server says it
STATUS_OK = "ok"  # the run's process ended with 0 (else "exit N", "killed by signal N", ...)
STATUS_TIMED_OUT = "timed out"  # the start of a run's status when its time was up


def timed_out(seconds: float) -> str:
    return f"{STATUS_TIMED_OUT} after {seconds:g} s"


# ------------------------------------------------------------ judge -> run
PLAN_FILE, INPUTS_FILE, INJECT_FILE = "plan.json", "inputs.pt", "inject.pt"  # in the run's WORK folder


class PlanCell(TypedDict):
    label: str
    kind: Literal["locked", "answer", "added"]
    grade_id: str | None
    source: str
    seeded: bool  # the judge changed it: it depends on the submission's seed


class OneGoRun(TypedDict):
    """An in-one-go exercise's own run (EX3's): its answer cell, handed the correct gradients
    `inject` names, and the gradient it asks for (`keep`)."""

    cell: str
    inject: list[str]
    keep: str


class TrainingPlan(TypedDict):
    """The training exercise: manual_backward's names, its result's order, the rate, and a
    written exercise's definition (its forward pass on each batch; None: Backprop Ninja's)."""

    arguments: list[str]
    params: list[str]
    learning_rate: float
    forward: dict | None
    numbers: dict[str, int | float]  # a written exercise's sizes (B, C): plain numbers, not tensors


class ReplayPlan(TypedDict, total=False):
    """WORK/plan.json: the cells and how to run them, and what the exercise asks (the runner
    knows no exercise: every name it keeps or is handed comes from here)."""

    cells: list[PlanCell]
    first_answer: int  # cells before it are the setup, run once per run
    snapshots: dict[str, list[str]]  # answer cell -> the gradients the notebook's run keeps after it
    exercise1: dict[str, str]  # exercise 1's gradients: dX -> X (a "local:dX" run stops after its cell)
    exercise1_cell: str
    one_go: dict[str, OneGoRun]  # run name (EX3) -> that run
    cleared: list[str]  # in-one-go answer cells: their gradient is removed before they run
    training: TrainingPlan | None  # manual_backward called and trained with
    data_dir: str  # holds the trusted names.txt; the run's current folder
    train_seed: int  # exercise 4's training batches
    train_steps: int
    statement_seconds: float  # one statement of the student's; past it, the next one runs
    run_tmp_mb: int  # the run's private /tmp and /dev/shm


class RunInputs(TypedDict):
    """WORK/inputs.pt and WORK/inject.pt: tensors only (loaded with weights_only)."""

    ex4: dict[str, torch.Tensor]  # one forward pass's values: what manual_backward may take
    # start parameters, then Backprop Ninja's Xtr and Ytr, or a written exercise's batches
    # (batch_key(i, name)) and its tensor constants
    train: dict[str, torch.Tensor]
    inject: dict[str, torch.Tensor]  # exactly the correct values this run is handed


class ServerHello(TypedDict):
    """The replay server's first line on stdin: the setup cells it runs once, and where."""

    prefix: list[PlanCell]
    data_dir: str


class RunRequest(TypedDict):
    """Each later line: one run of the submission whose files are in `workdir`."""

    workdir: str
    run: str  # AS_SUBMITTED, EX3 or run_name_local(...)
    timeout: float
    nonce: str  # the answer's, and no run's
    autograd: str  # one of GUARD_MODES (anything else: BLOCK)
    statement_seconds: float | None  # this run's, if not the plan's
    group: bool  # may go to the submission's run group (run_group.py): a blocked run after the first
    train: bool  # exercise 4's training loop too (absent: True); a watched run that could change
    # nothing with it skips it (grader/verdicts/outcomes.py's watch_training)


# ------------------------------------------------------------ run -> judge
MAX_FRAME_BYTES = 16 * 1024 * 1024  # one result frame; an honest run's is well under 1 MB
META_HEADER = struct.Struct(">I")  # a frame: this, the size of the JSON record; the record; the tensors


class AnswerHeader(TypedDict):
    """The server's answer to a RunRequest: this as a JSON line, then `size` bytes of frame."""

    nonce: str
    status: str  # STATUS_OK, timed_out(...), ...
    size: int  # at most MAX_FRAME_BYTES
    cpu: float | None  # the run's user CPU seconds, as the kernel counted them
    pace: float  # the pace work's CPU seconds around the run, timed by the server (exercise/pace.py)


class ValueInfo(TypedDict, total=False):
    kind: Literal["missing", "none", "other", "tensor"]  # a tensor travels in the archive
    type: str  # "other": the value's type name


VALUE_KINDS = ("missing", "none", "other", "tensor")


class RunError(TypedDict):
    cell: str
    line: int | None
    error: str  # "ExcType: message", cut at 300 characters
    assigns: list[str]  # names the failed statement would have set


class AutogradEvent(TypedDict):
    """autograd_guard.py: the student's code reached for autograd, or worked around the guard."""

    kind: Literal["call", "bypass", "tamper", "refused"]  # EVENT_KINDS
    what: str  # "torch.autograd.grad", "the autograd engine", "sys.setprofile", ...
    cell: str  # the cell and line of the statement that did it
    line: int | None


class RunRecord(TypedDict, total=False):
    """The JSON part of a run's result; tensors travel beside it, under the keys of `values`."""

    values: dict[str, ValueInfo]  # value_key(...): "<answer cell>/<name>", "<name>", "ex4/<dX>"
    names: list[str]  # the main run's global names (for "is it misspelt?" hints)
    own: list[str]  # the student's name of each OWN tensor, in order
    aliases: list[list[str]]  # pairs of names bound to one tensor
    n_at: dict[str, int | str]  # `n` when each answer cell ran
    errors: list[RunError]
    ex4_error: str | None
    train_error: str | None
    seconds: float
    partial: bool  # a checkpoint: the run went on after it
    autograd: list[AutogradEvent]  # in order; at most MAX_EVENTS
    cpu: dict[str, float]  # CPU seconds by cell label, spec.EX4_FUNCTION and TRAINING_CPU


# ------------------------------------------------------------ the kit, as student code sees it
# The kit's files inside the sandbox (confine/bwrap.py binds them; nothing else of the kit is
# there); in a plain child process, kit_view.py refuses to import the rest.
KIT_INSIDE = ("__init__.py", "incell.py", "exercise", "untrusted")

# ------------------------------------------------------------ the autograde kernel
TEST_CELLS_MIME = "application/vnd.backprop-ninja.test-cells+json"  # a block's answer (test_cells.py)
# How a warm kernel's cells reach its server's first cells (kernel_prefix.py), and the call that
# takes the skippable ones in one round trip (grader/preprocessors/prefix_block.py)
PREFIX_MODULE = "_backprop_ninja_prefix"
PREFIX_TAKE_CALL = f"__import__({PREFIX_MODULE!r}).take("  # how the kernel knows the cell for take's
PREFIX_TAKE = PREFIX_TAKE_CALL + "{nonce!r}, {first}, {count})"
SUBMISSION_INSIDE = "/run/submission"  # the read-only copy a kernel's folder is filled from
IPC_INSIDE = "/run/kernel-ipc"  # the warm server's socket folder, in its second place
KERNEL_CONNECTION_FILE = ".kernel-connection.json"  # in the kernel's folder, inside
# Every autograde kernel's options, cold or warm: its IPython history in memory, not an sqlite
# file written after each cell by a thread of its own (nothing reads a grading kernel's history;
# `In`, `_i` and %history still work)
KERNEL_OPTIONS = ("--HistoryManager.hist_file=:memory:",)


class KernelStart(TypedDict):
    """What grader/confine/warm.py asks the warm kernel server (zygote.py) for: {"start": this}."""

    connection: dict  # the kernel's connection info
    cwd: str  # its folder, under `stage`
    stage: str
    ipc: str  # the socket folder
    env: dict[str, str]  # the whole environment (grader/confine/bwrap.py's inside_environment)
    cpu_seconds: int
    disk_mb: int
    tmp_mb: int
