"""The replay: the student's notebook run again on fresh inputs, in a separate process.

This module runs in the *untrusted* processes that grader/untrusted/server.py forks. It decides
nothing: it executes the cells of the plan the judge wrote (locked cells from the
instructor's notebook with the judge's seed, the student's answer and added cells), and
writes what the student's code produced. The judge compares in its own process.

Each run forks from the state after the setup cells, so a crash, an exit or an in-place
edit in one run cannot touch another. Statements run one at a time: one that raises costs
only what depends on it.
"""

from __future__ import annotations

import ast
import builtins
import resource
import signal
import time

import torch

from ..exercise import spec
from ..exercise.cells import strip_magics
from ..exercise.compare import MISSING
from . import known_cells
from .assigned import assigned, own_names
from .autograd_guard import Guard
from .backward_call import BackwardFailed, accepted_names, as_update, call_manual_backward, raised, taken
from .derivative_block import UNAVAILABLE
from .protocol import (
    AS_SUBMITTED,
    EX4,
    LOCAL,
    MAX_OWN,
    OWN,
    TRAINED,
    TRAINING_CPU,
    ReplayPlan,
    RunInputs,
    RunRecord,
    ValueInfo,
    parse_run_name,
    value_key,
)
from .training_batches import training_batches

_setitimer = signal.setitimer  # a blocked run's signal module refuses


def _cpu() -> float:
    """This thread's CPU seconds of computing: its CPU clock, to the nanosecond, less its system
    time (writing files, faulting memory in: no answer's work; a disk filler's 0.14 s). The
    system time is getrusage's, which the sandbox's CPU limit makes advance by 4 ms ticks: a
    cell's count is within a tick of its user time (the user time getrusage gives is as coarse:
    a 3 ms cell read 0 or 8 ms)."""
    return time.thread_time() - resource.getrusage(resource.RUSAGE_THREAD).ru_stime


def _discard(*args, **kwargs) -> None:
    """print in a run: nobody reads a run's output, and formatting a tensor costs more than
    a derived backward (7 ms for a 32x27 one), which an answer cell's debugging prints must
    not be charged for (grader/verdicts/numeric.py)."""


class StatementTimeout(BaseException):
    """A statement ran too long (an infinite loop): it is stopped, the next one runs."""


class NoIPython:
    """Magics are not part of the answer: the replay ignores them."""

    def __getattr__(self, name):
        return lambda *a, **k: None


def _export(value) -> tuple[ValueInfo, torch.Tensor | None]:
    """A plain, detached copy of what the student left, safe to hand to the judge."""
    if isinstance(value, torch.Tensor):
        t = value.detach()
        if type(t) is not torch.Tensor:
            t = t.as_subclass(torch.Tensor)
        if t.is_complex():
            return {"kind": "other", "type": "complex tensor"}, None
        # the judge takes float32 only: an honest float64 or integer answer is converted here
        return {"kind": "tensor"}, t.to(torch.float32).clone().contiguous()
    if value is None:
        return {"kind": "none"}, None
    return {"kind": "other", "type": type(value).__name__}, None


class Runner:
    def __init__(self, plan: ReplayPlan, inputs: RunInputs, checkpoint=None):
        self.plan, self.inputs = plan, inputs
        self.errors: list = []
        self.checkpoint = checkpoint  # called with what the main run has so far
        self.statement_seconds = float(plan.get("statement_seconds", 10.0))
        self.guard: Guard | None = None  # autograd_guard.install, before the first answer cell
        self.sent: tuple[RunRecord, dict] = ({}, {})  # the last checkpoint
        self.cpu: dict[str, float] = {}
        self.trains = True  # exercise 4's training loop after its call (RunRequest's "train")

    def send_checkpoint(self, record: RunRecord, tensors: dict) -> None:
        record = dict(record, errors=self.errors, partial=True, cpu=self.cpu)
        if self.guard:
            record["autograd"] = self.guard.events
        self.sent = (record, dict(tensors))
        if self.checkpoint:
            self.checkpoint(record, tensors)

    def on_alarm(self, signum, frame):
        """SIGALRM's handler in a run (the server installs it)."""
        raise StatementTimeout(f"stopped after {self.statement_seconds:g} s")

    def spent(self, where: str, seconds: float) -> None:
        """CPU seconds by cell (and for exercise 4's call and training): what the judge
        compares with a derived backward's cost (grader/verdicts/numeric.py)."""
        self.cpu[where] = self.cpu.get(where, 0.0) + max(seconds, 0.0)  # a system tick may overshoot

    # ------------------------------------------------------------ executing cells
    def run_cell(
        self, ns: dict, cell: dict, inject: dict | None = None, twin: known_cells.DataSplitTwin | None = None
    ) -> None:
        label = cell["label"]
        try:
            tree = ast.parse(strip_magics(cell["source"]), filename=label)
        except SyntaxError as e:
            self.errors.append(
                {"cell": label, "line": e.lineno, "error": f"SyntaxError: {e.msg}", "assigns": []}
            )
            return
        for stmt in tree.body:
            if self.guard:
                self.guard.where = (label, stmt.lineno)
            if inject:
                for k, v in inject.items():  # a fresh copy before every statement
                    ns[k] = v.clone()
            try:
                error = self._exec(ns, stmt, label)
                if error is not None:
                    self._failed(label, stmt, error)
            finally:
                if self.guard:
                    self.guard.check()
                if twin:
                    twin.after_statement(ns)
        if twin:
            twin.done(ns)

    def _exec(self, ns: dict, stmt, label: str) -> BaseException | None:
        """One statement, within the plan's time; its CPU seconds are the cell's, and the
        runner's own work on an exception (the statement's names, the message) is not."""
        started = _cpu()
        try:
            _setitimer(signal.ITIMER_REAL, self.statement_seconds)
            try:
                exec(compile(ast.Module([stmt], []), label, "exec"), ns)
            finally:
                _setitimer(signal.ITIMER_REAL, 0)
        except BaseException as e:  # noqa: BLE001 - the student's code: record, go on
            if isinstance(e, KeyboardInterrupt):
                raise
            return e
        finally:
            self.spent(label, _cpu() - started)
        return None

    def _failed(self, label: str, stmt, e: BaseException) -> None:
        message = f"{type(e).__name__}: {e}"
        if self.guard and UNAVAILABLE in message:  # torch's derivative code, refused
            self.guard.note("call", str(e).partition(f" {UNAVAILABLE}")[0][-200:])
        self.errors.append(
            {"cell": label, "line": stmt.lineno, "error": message[:300], "assigns": sorted(assigned(stmt))}
        )

    def setup(self, ns: dict, start: int = 0) -> dict:
        for cell in self.plan["cells"][start : self.plan["first_answer"]]:
            self.run_cell(ns, cell, twin=known_cells.twin_for(cell["source"]))  # the data split, vectorised
        return ns

    # ------------------------------------------------------------ the runs
    def run(self, ns: dict, name: str) -> tuple[RunRecord, dict]:
        """Execute one run in this (forked) process; return (record, tensors)."""
        meta: RunRecord = {"values": {}, "names": [], "aliases": [], "n_at": {}}
        tensors: dict = {}
        ns["__builtins__"] = {**vars(builtins), "print": _discard}  # the student's names stay theirs
        plan, (kind, _) = self.plan, parse_run_name(name)
        snapshots, one_go = plan.get("snapshots", {}), plan.get("one_go", {}).get(name)
        for cell in plan["cells"][plan["first_answer"] :]:
            gid = cell.get("grade_id")
            if cell["kind"] == "answer":
                meta["n_at"][gid] = ns.get("n") if isinstance(ns.get("n"), int) else repr(ns.get("n"))[:40]
            if kind == LOCAL:
                if gid != plan["exercise1_cell"]:
                    self.run_cell(ns, cell)
                    continue
                before = set(ns)
                self.run_cell(ns, cell, self.inputs["inject"])
                # every gradient, each as its run alone would keep it: one below this run's that
                # comes out right here, with right inputs, needs no run of its own (outcomes.settled_by)
                for gradient in plan["exercise1"]:
                    self._snapshot(ns, [gradient], meta, tensors)
                self._own(ns, before, meta, tensors)
                return meta, tensors
            if gid in plan.get("cleared", []):
                for name in snapshots[gid]:  # an in-one-go exercise must compute it itself
                    ns.pop(name, None)
            if one_go and gid == one_go["cell"]:
                self.run_cell(ns, cell, {k: self.inputs["inject"][k] for k in one_go["inject"]})
                self._snapshot(ns, [one_go["keep"]], meta, tensors)
                return meta, tensors
            before = set(ns) if kind == AS_SUBMITTED and gid == plan["exercise1_cell"] else None
            self.run_cell(ns, cell)
            if kind == AS_SUBMITTED and gid in snapshots:
                self._snapshot(ns, snapshots[gid], meta, tensors, where=gid)
                if before is not None:
                    self._own(ns, before, meta, tensors)
                self.send_checkpoint(meta, tensors)
        if kind == AS_SUBMITTED:
            meta["names"] = sorted(k for k in ns if isinstance(k, str) and not k.startswith("_"))[:2000]
            if plan.get("training"):
                self._exercise4(ns, meta, tensors)
        return meta, tensors

    def _snapshot(self, ns, names, meta, tensors, where=None):
        """`names` as they are now, under value_key(where, name) (bare when `where` is None)."""
        seen = {}
        for name in names:
            key = value_key(where, name)
            value = ns.get(name, MISSING)
            if value is MISSING:
                meta["values"][key] = {"kind": "missing"}
                continue
            info, t = _export(value)
            meta["values"][key] = info
            if t is not None:
                tensors[key] = t
                same = (value.data_ptr(), tuple(value.shape), tuple(value.stride()))
                if same in seen and value.numel():  # one tensor under two names (a .view is fine)
                    meta["aliases"].append([seen[same], name])
                seen.setdefault(same, name)

    def _own(self, ns, before, meta, tensors):
        """Tensors of the student's own names the shape of a gradient exercise 1 left unassigned,
        as OWN/0, OWN/1, ... (the judge tells a rename by its value)."""
        exercise1 = self.plan["exercise1"]
        missing = [target for name, target in exercise1.items() if name not in ns]
        shapes = {tuple(ns[t].shape) for t in missing if isinstance(ns.get(t), torch.Tensor)}
        meta["own"] = own_names(ns, before, shapes, set(exercise1), MAX_OWN) if shapes else []
        for i, name in enumerate(meta["own"]):
            info, t = _export(ns[name])
            meta["values"][value_key(OWN, str(i))] = info
            tensors[value_key(OWN, str(i))] = t

    def _exercise4(self, ns, meta, tensors):
        fn, plan = ns.get(spec.EX4_FUNCTION), self.plan["training"]
        numbers = plan.get("numbers", {})
        handed = {k: v.clone() for k, v in self.inputs["ex4"].items() if k in plan["arguments"]}
        if self.guard:
            self.guard.where = (spec.EX4_FUNCTION, None)
        started = _cpu()
        try:
            out = call_manual_backward(fn, {**handed, **numbers}, plan["params"])
        except BackwardFailed as e:
            meta["ex4_error"] = str(e)[:300]
            return
        except BaseException as e:  # noqa: BLE001
            if isinstance(e, KeyboardInterrupt):
                raise
            meta["ex4_error"] = raised(e)[:300]
            return
        finally:
            self.spent(spec.EX4_FUNCTION, _cpu() - started)
        for pname, value in zip(plan["params"], out):
            key = value_key(EX4, f"d{pname}")
            info, t = _export(value)
            meta["values"][key] = info
            if t is not None:
                tensors[key] = t
        if self.trains:
            self._train(fn, meta, tensors)

    def _train(self, fn, meta, tensors):
        """A short training run with the student's backward: Backprop Ninja's loop, or a written
        exercise's forward pass on the judge's batches."""
        plan, tr = self.plan["training"], self.inputs["train"]
        params = {k: tr[k].clone() for k in plan["params"]}
        steps = training_batches(plan, tr, int(self.plan["train_seed"]), int(self.plan["train_steps"]))
        started = _cpu()
        try:
            takes = accepted_names(fn)  # once: inspect.signature each step: 7% of the training's samples
            for forward in steps:
                v = forward(params)
                grads = list(fn(**taken({k: v[k] for k in plan["arguments"] if k in v}, takes)))
                for k, grad in zip(plan["params"], grads):
                    params[k] = params[k] - plan["learning_rate"] * as_update(k, grad, params[k])
        except BaseException as e:  # noqa: BLE001
            if isinstance(e, KeyboardInterrupt):
                raise
            meta["train_error"] = f"training raised {type(e).__name__}: {e}"[:300]
            return
        finally:
            self.spent(TRAINING_CPU, _cpu() - started)
        for k, t in params.items():
            tensors[value_key(TRAINED, k)] = (
                t.detach().as_subclass(torch.Tensor).to(torch.float32).clone().contiguous()
            )
