"""The replay: the student's notebook run again on fresh inputs, in a separate process.

This module runs in the *untrusted* process (`python -m grader.replay WORKDIR`). It decides
nothing: it executes the cells of the plan the judge wrote (locked cells from the
instructor's notebook with the judge's seed, the student's answer and added cells), and
writes what the student's code produced. The judge compares in its own process.

Each run forks from the state after the setup cells, so a crash, an exit or an in-place
edit in one run cannot touch another. Statements run one at a time: one that raises costs
only what depends on it.
"""
from __future__ import annotations

import ast
import io
import json
import os
import select
import signal
import struct
import sys
import time
from pathlib import Path

import torch

from . import isolation, lecture, spec
from .grading import TRAINING_LR, accepted_arguments
from .cells import strip_magics

_real_exit = os._exit  # the harness's own; a student's os._exit only ends a statement
EX1_NAMES = [g.name for g in spec.GRADIENTS if g.exercise == 1]
STATEMENT_SECONDS = float(os.environ.get("BACKPROP_NINJA_STATEMENT_SECONDS", "10"))


class StatementTimeout(BaseException):
    """A statement ran too long (an infinite loop): it is stopped, the next one runs."""


def _on_alarm(signum, frame):
    raise StatementTimeout(f"stopped after {STATEMENT_SECONDS:g} s")


def _student_exit(code=0):
    raise SystemExit(f"os._exit({code}) called")
SNAPSHOT = {spec.ANSWER_CELLS[1]: EX1_NAMES, spec.ANSWER_CELLS[2]: ["dlogits"],
            spec.ANSWER_CELLS[3]: ["dhprebn"]}


class _NoIPython:
    """Magics are not part of the answer: the replay ignores them."""
    def __getattr__(self, name):
        return lambda *a, **k: None



def _export(value):
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
    def __init__(self, plan: dict, inputs: dict, checkpoint=None):
        self.plan, self.inputs = plan, inputs
        self.errors: list[dict] = []
        self.checkpoint = checkpoint  # called with what the main run has so far

    # ------------------------------------------------------------ executing cells
    def run_cell(self, ns: dict, cell: dict, inject: dict | None = None) -> None:
        label = cell["label"]
        try:
            tree = ast.parse(strip_magics(cell["source"]), filename=label)
        except SyntaxError as e:
            self.errors.append({"cell": label, "line": e.lineno, "error": f"SyntaxError: {e.msg}", "assigns": []})
            return
        for stmt in tree.body:
            if inject:
                for k, v in inject.items():  # a fresh copy before every statement
                    ns[k] = v.clone()
            try:
                signal.setitimer(signal.ITIMER_REAL, STATEMENT_SECONDS)
                try:
                    exec(compile(ast.Module([stmt], []), label, "exec"), ns)
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
            except BaseException as e:  # noqa: BLE001 - the student's code: record, go on
                if isinstance(e, KeyboardInterrupt):
                    raise
                self.errors.append({"cell": label, "line": stmt.lineno,
                                    "error": f"{type(e).__name__}: {e}"[:300],
                                    "assigns": sorted(_assigned(stmt))})

    def setup(self, ns: dict, start: int = 0) -> dict:
        for cell in self.plan["cells"][start: self.plan["first_answer"]]:
            self.run_cell(ns, cell)
        return ns

    # ------------------------------------------------------------ the runs
    def run(self, ns: dict, name: str) -> tuple[dict, dict]:
        """Execute one run in this (forked) process; return (meta, tensors)."""
        meta: dict = {"values": {}, "names": [], "aliases": [], "n_at": {}}
        tensors: dict = {}
        cells = self.plan["cells"][self.plan["first_answer"]:]
        kind, _, target = name.partition(":")
        for cell in cells:
            gid = cell.get("grade_id")
            if gid in SNAPSHOT or gid == spec.ANSWER_CELLS[4]:
                meta["n_at"][gid] = ns.get("n") if isinstance(ns.get("n"), int) else repr(ns.get("n"))[:40]
            if kind == "local":
                if gid == spec.ANSWER_CELLS[1]:
                    self.run_cell(ns, cell, self._inject(target))
                    self._snapshot(ns, [target], meta, tensors)
                    return meta, tensors
                self.run_cell(ns, cell)
                continue
            if gid in (spec.ANSWER_CELLS[2], spec.ANSWER_CELLS[3]):
                for name in SNAPSHOT[gid]:  # exercises 2 and 3 must compute it themselves
                    ns.pop(name, None)
            if kind == "ex3" and gid == spec.ANSWER_CELLS[3]:
                self.run_cell(ns, cell, {"dhpreact": self.inputs["inject"]["dhpreact"]})
                self._snapshot(ns, ["dhprebn"], meta, tensors)
                return meta, tensors
            self.run_cell(ns, cell)
            if kind == "main" and gid in SNAPSHOT:
                self._snapshot(ns, SNAPSHOT[gid], meta, tensors, prefix=f"{gid}/")
                if self.checkpoint:
                    self.checkpoint(dict(meta, errors=self.errors, partial=True), tensors)
        if kind == "main":
            meta["names"] = sorted(k for k in ns if isinstance(k, str) and not k.startswith("_"))[:2000]
            self._exercise4(ns, meta, tensors)
        return meta, tensors

    def _inject(self, target: str) -> dict:
        up = lecture.upstream(target[1:])
        return {"d" + t: v for t, v in ((t, self.inputs["inject"].get("d" + t)) for t in up) if v is not None}

    def _snapshot(self, ns, names, meta, tensors, prefix=""):
        seen = {}
        for name in names:
            value = ns.get(name, _MISSING)
            if value is _MISSING:
                meta["values"][prefix + name] = {"kind": "missing"}
                continue
            info, t = _export(value)
            meta["values"][prefix + name] = info
            if t is not None:
                tensors[prefix + name] = t
                key = (value.data_ptr(), tuple(value.shape), tuple(value.stride()))
                if key in seen and value.numel():   # one tensor under two names (a .view is fine)
                    meta["aliases"].append([seen[key], name])
                seen.setdefault(key, name)

    def _exercise4(self, ns, meta, tensors):
        fn = ns.get(spec.EX4_FUNCTION)
        ex4 = self.inputs["ex4"]
        if not callable(fn):
            meta["ex4_error"] = f"{spec.EX4_FUNCTION} is not defined as a function"
            return
        try:
            out = list(_call(fn, {k: v.clone() for k, v in ex4.items() if k in spec.EX4_ARGUMENTS}))
        except BaseException as e:  # noqa: BLE001
            if isinstance(e, KeyboardInterrupt):
                raise
            meta["ex4_error"] = f"{spec.EX4_FUNCTION} raised {type(e).__name__}: {e}"[:300]
            return
        if len(out) != len(spec.EX4_PARAMETERS):
            meta["ex4_error"] = (f"{spec.EX4_FUNCTION} returned {len(out)} values, expected "
                                 f"{len(spec.EX4_PARAMETERS)}: [d{', d'.join(spec.EX4_PARAMETERS)}]")
            return
        for pname, value in zip(spec.EX4_PARAMETERS, out):
            info, t = _export(value)
            meta["values"][f"ex4/d{pname}"] = info
            if t is not None:
                tensors[f"ex4/d{pname}"] = t
        self._train(fn, meta, tensors)

    def _train(self, fn, meta, tensors):
        """A short run of the lecture's training loop with the student's backward."""
        tr = self.inputs["train"]
        params = {k: tr[k].clone() for k in spec.EX4_PARAMETERS}
        g = torch.Generator().manual_seed(int(self.plan["train_seed"]))
        try:
            for _ in range(int(self.plan["train_steps"])):
                Xb, Yb = lecture.draw_batch(tr["Xtr"], tr["Ytr"], g)
                v = lecture.cross_entropy_forward(params, Xb, Yb)
                grads = list(_call(fn, {k: v[k] for k in spec.EX4_ARGUMENTS}))
                for k, grad in zip(spec.EX4_PARAMETERS, grads):
                    params[k] = params[k] - TRAINING_LR * torch.as_tensor(grad).reshape(params[k].shape)
        except BaseException as e:  # noqa: BLE001
            if isinstance(e, KeyboardInterrupt):
                raise
            meta["train_error"] = f"training raised {type(e).__name__}: {e}"[:300]
            return
        for k, t in params.items():
            tensors[f"train/{k}"] = t.detach().as_subclass(torch.Tensor).to(torch.float32).clone().contiguous()


_MISSING = object()


def _assigned(stmt) -> set[str]:
    names = set()
    for node in ast.walk(stmt):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names


def _call(fn, inputs: dict):
    return fn(**accepted_arguments(fn, inputs))


# ------------------------------------------------------------ the process tree
FRAME_HEADER = struct.Struct(">Q")
MAX_FRAME_BYTES = 16 * 1024 * 1024     # an honest run's result is well under 1 MB
MAX_RUN_BYTES = 4 * MAX_FRAME_BYTES    # all a run may send (checkpoints included)
RUN_TMP_MB = int(os.environ.get("BACKPROP_NINJA_RUN_TMP_MB", "256"))


def encode_frame(meta: dict, tensors: dict) -> bytes:
    """One result: the meta record as JSON, then the tensors as torch.save writes them.
    The judge validates both before it uses anything (grader/results.py)."""
    blob = io.BytesIO()
    torch.save(tensors, blob)
    meta_json = json.dumps(meta, default=str).encode()
    return struct.pack(">I", len(meta_json)) + meta_json + blob.getvalue()


def _write(channel: int, name: str, meta: dict, tensors: dict) -> None:
    """Send a result (a checkpoint or the last word) on the run's own pipe to the server."""
    frame = encode_frame(meta, tensors)
    data = memoryview(FRAME_HEADER.pack(len(frame)) + frame)
    while data:
        data = data[os.write(channel, data):]


def read_run_inputs(work: Path) -> tuple[dict, dict]:
    """The plan and the inputs of one run. WORK/inject.pt holds exactly the correct values
    this run is handed, nothing more."""
    plan = json.loads((work / "plan.json").read_text())
    inputs = torch.load(work / "inputs.pt", weights_only=True)
    inputs["inject"] = torch.load(work / "inject.pt", weights_only=True)
    return plan, inputs


def replay_run(plan: dict, inputs: dict, run: str, channel: int, warm: tuple[list, dict] | None = None) -> None:
    """One run of one submission, in this (freshly forked, isolated) process: the setup cells
    from where the warm server left off, then the run. Results go to `channel`."""
    runner = Runner(plan, inputs, checkpoint=lambda meta, tensors: _write(channel, run, meta, tensors))
    t0 = time.perf_counter()
    prefix = warm[0] if warm else []
    if warm and plan["cells"][:len(prefix)] == prefix:
        ns = runner.setup(dict(warm[1]), start=len(prefix))
    else:
        ns = runner.setup({"__name__": "__main__", "get_ipython": _NoIPython})
    meta, tensors = runner.run(ns, run)
    meta["errors"] = runner.errors
    meta["seconds"] = time.perf_counter() - t0
    _write(channel, run, meta, tensors)


def _run_child(req: dict, warm, channel: int, pid_pipe: int) -> int:
    """The forked child: new namespaces, then the run itself as PID 1 of them. Returns the
    run's exit status for the server (128 + signal when it was killed)."""
    os.setpgid(0, 0)
    isolation.close_other_fds({channel, pid_pipe})  # the server's pipes stay the server's
    try:
        isolation.new_namespaces()
        isolated = True
    except OSError:
        isolated = False  # said in the status; the process group is all that is left
    run_pid = os.fork()
    if run_pid == 0:
        code = 0
        try:
            plan, inputs = read_run_inputs(Path(req["workdir"]))
            # the trusted names.txt; it stays reachable as the current folder under the new /tmp
            os.chdir(plan["data_dir"])
            if isolated:
                isolation.private_scratch(RUN_TMP_MB)
            isolation.close_other_fds({channel})
            sys.stdout = sys.stderr = open(os.devnull, "w")
            signal.signal(signal.SIGALRM, _on_alarm)
            os._exit = _student_exit
            replay_run(plan, inputs, req["run"], channel, warm)
        except BaseException:  # noqa: BLE001
            code = 1
        finally:
            _real_exit(code)
    os.close(channel)
    os.write(pid_pipe, struct.pack(">iB", run_pid, isolated))
    os.close(pid_pipe)
    _, status = os.waitpid(run_pid, 0)
    return 128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def _one_run(req: dict, warm) -> tuple[str, bytes | None]:
    """Fork, let the child run, read what it sends (bounded), and make sure nothing of it
    is left: killing the run's PID 1 ends its whole namespace."""
    results_r, results_w = os.pipe()
    pid_r, pid_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(results_r)
            os.close(pid_r)
            code = _run_child(req, warm, results_w, pid_w)
        finally:
            _real_exit(code)
    os.close(results_w)
    os.close(pid_w)
    info = os.read(pid_r, 5)
    os.close(pid_r)
    run_pid, isolated = struct.unpack(">iB", info) if len(info) == 5 else (None, 0)
    status, frame = _collect(pid, results_r, float(req["timeout"]))
    for victim in (run_pid, pid):
        if victim:
            _kill(victim)
    _kill(-pid)
    os.close(results_r)
    if not isolated:
        status += " (not isolated: no user namespaces here)"
    return status, frame


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _collect(pid: int, results: int, timeout: float) -> tuple[str, bytes | None]:
    """Read frames until the run's child has exited and its pipe is closed, or the time is up.
    Keeps the last complete frame; a run that sends too much is stopped."""
    deadline = time.monotonic() + timeout
    buf, last, total, status, eof = bytearray(), None, 0, None, False
    while True:
        if status is None:
            done, raw = os.waitpid(pid, os.WNOHANG)
            if done:
                code = os.WEXITSTATUS(raw) if os.WIFEXITED(raw) else 128 + os.WTERMSIG(raw)
                status = "ok" if code == 0 else (f"killed by signal {code - 128}" if code > 128 else f"exit {code}")
                deadline = min(deadline, time.monotonic() + 2.0)  # the pipe closes with the namespace
        if status is not None and eof:
            return status, last
        if time.monotonic() > deadline:
            return status or f"timed out after {timeout:g} s", last
        ready, _, _ = select.select([results], [], [], 0.01)
        if ready and not eof:
            chunk = os.read(results, 1 << 20)
            eof = not chunk
            total += len(chunk)
            if total > MAX_RUN_BYTES:
                return f"stopped: the run sent more than {MAX_RUN_BYTES} bytes", last
            buf += chunk
            last, buf = _frames(buf, last)
            if last is _TOO_BIG:
                return f"stopped: a result over {MAX_FRAME_BYTES} bytes", None


_TOO_BIG = b""


def _frames(buf: bytearray, last):
    while len(buf) >= FRAME_HEADER.size:
        (size,) = FRAME_HEADER.unpack_from(buf)
        if size > MAX_FRAME_BYTES:
            return _TOO_BIG, buf
        if len(buf) < FRAME_HEADER.size + size:
            break
        last = bytes(buf[FRAME_HEADER.size: FRAME_HEADER.size + size])
        del buf[: FRAME_HEADER.size + size]
    return last, buf


def serve() -> int:
    """A warm replay server that never runs a student's code itself: torch imported and
    the shared setup cells run once, then each request forks an isolated child that runs
    one run of one submission. The judge sends the runs one by one, so no run can see data
    meant for a later one.

    Protocol, on stdin one JSON object a line: first {"prefix": cells, "data_dir": path},
    then requests {"workdir", "run", "timeout", "nonce"}. On the original stdout, for each:
    a JSON header line {"nonce", "status", "size"} and then `size` bytes, the run's last
    result frame (encode_frame). No run can write here: it holds none of these pipes."""
    isolation.not_dumpable()
    proto = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)                      # anything printed by the setup cells goes to stderr
    sys.stdout = sys.stderr
    torch.set_num_threads(1)           # fork-safe, and one core per replay
    torch.set_grad_enabled(False)      # no autograd to copy answers from
    hello = json.loads(sys.stdin.readline())
    os.chdir(hello["data_dir"])
    runner = Runner({"cells": hello["prefix"], "first_answer": len(hello["prefix"])}, {})
    ns0 = runner.setup({"__name__": "__main__", "get_ipython": _NoIPython})
    warm = (hello["prefix"], ns0)
    proto.write((json.dumps({"ready": True, "errors": runner.errors}) + "\n").encode())
    for line in sys.stdin:
        req = json.loads(line)
        status, frame = _one_run(req, warm)
        frame = frame or b""
        header = {"nonce": req.get("nonce"), "status": status, "size": len(frame)}
        proto.write((json.dumps(header) + "\n").encode() + frame)
    return 0


if __name__ == "__main__":
    sys.exit(serve())
