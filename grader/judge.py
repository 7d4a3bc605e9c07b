"""The judge: grades decided outside the student's process, on fresh inputs.

It draws fresh parameters and a fresh batch, computes the reference gradients here, has
the replay run the student's cells on the same inputs in another process, then compares,
credits carried errors, and explains each failure. Nothing the student's code does can
reach the comparisons: they happen in this process, on values loaded as plain tensors.
"""
from __future__ import annotations

import ast
import contextlib
import functools
import hashlib
import json
import math
import os
import shutil
import signal
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from . import grading, hints, lecture, results, spec
from .cells import strip_magics
from .compare import MISSING, compare
from .mistakes import known_mistakes
from .results import RunResult, Unusable
from .replay_client import Launcher, exchange_root, launch_plain, launch_sandboxed, server_for
from .sandbox import Sandbox
from .scan import Finding, scan_source

EX1 = [g for g in spec.GRADIENTS if g.exercise == 1]
EVAL_EXAMPLES = 4000


@dataclass
class Settings:
    seed: int
    batch_size: int = lecture.BATCH_SIZE
    run_timeout: float = 30.0           # one run of the replay (the student's cells once)
    total_timeout: float = 600.0        # the whole replay of one submission
    train_steps: int = 100
    carried_credit: float = 1.0         # share of a gradient's points for a right rule fed a wrong input
    judge_seconds: float = 60.0         # the judge's own verdicts for one submission (main thread only)

    @property
    def train_seed(self) -> int:
        """The batches of exercise 4's training run, the replay's and the reference's alike."""
        return self.seed + 3


def seed_for(student: str, salt: str) -> int:
    """Fresh inputs per student, the same on every re-run (grading is idempotent)."""
    return int.from_bytes(hashlib.sha256(f"{salt}:{student}".encode()).digest()[:4], "big") + 1


# ------------------------------------------------------------ fresh inputs and references
_datasets: dict[tuple, lecture.Dataset] = {}


def dataset(names_txt: Path) -> lecture.Dataset:
    key = (str(names_txt), names_txt.stat().st_mtime_ns)
    if key not in _datasets:
        _datasets.clear()
        _datasets[key] = lecture.load_dataset(names_txt.read_text().splitlines())
    return _datasets[key]


@dataclass
class Fresh:
    values: dict
    grads: dict
    branches: dict
    ex4_inputs: dict
    ex4_reference: dict
    train: dict
    eval_X: torch.Tensor
    eval_Y: torch.Tensor
    initial_eval_loss: float
    reference_train_loss: float   # the same training run with the kit's backward
    context_free_loss: float      # the best any net that ignores its input can reach on eval_Y
    shapes: dict[str, results.Expect]   # what a run may return, by key


def fresh_inputs(ds: lecture.Dataset, s: Settings) -> Fresh:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the replay computes single-threaded: same bits where it can
    try:
        params, g = lecture.init_params(seed=s.seed, vocab_size=ds.vocab_size)
        Xb, Yb = lecture.draw_batch(ds.Xtr, ds.Ytr, g, s.batch_size)
        values, grads = lecture.autograd_grads(params, Xb, Yb)
        _, branches = lecture.manual_grads(values)
        p4, g4 = lecture.init_params(seed=s.seed + 1, vocab_size=ds.vocab_size, n_hidden=lecture.N_HIDDEN_TRAIN)
        X4, Y4 = lecture.draw_batch(ds.Xtr, ds.Ytr, g4, s.batch_size)
        v4 = lecture.cross_entropy_forward(p4, X4, Y4, track=True)
        v4["loss"].backward()
        ex4_reference = {k: v4[k].grad.detach().clone() for k in spec.EX4_PARAMETERS}
        ex4_inputs = {k: v4[k].detach().clone() for k in spec.EX4_ARGUMENTS}
        p5, _ = lecture.init_params(seed=s.seed + 2, vocab_size=ds.vocab_size, n_hidden=lecture.N_HIDDEN_TRAIN)
        eval_X, eval_Y = ds.Xdev[:EVAL_EXAMPLES], ds.Ydev[:EVAL_EXAMPLES]
        initial = float(lecture.cross_entropy_forward(p5, eval_X, eval_Y)["loss"])
        train = dict(p5, Xtr=ds.Xtr, Ytr=ds.Ytr)
        trained = reference_training(train, s)
        reached = float(lecture.cross_entropy_forward(trained, eval_X, eval_Y)["loss"])
    finally:
        torch.set_num_threads(threads)
    # cross-entropy of one fixed distribution q is H(p) + KL(p||q) >= H(p), p the labels' frequencies
    freq = torch.bincount(eval_Y).double() / len(eval_Y)
    context_free = float(-(freq[freq > 0] * freq[freq > 0].log()).sum())
    return Fresh(values, grads, branches, ex4_inputs, ex4_reference, train, eval_X, eval_Y, initial,
                 reached, context_free, results.expected_shapes(grads, values, ex4_reference, ex4_inputs, train))


def reference_training(train: dict, s: Settings) -> dict:
    """Runner._train (grader/replay.py) with the kit's own backward: the same start, the same
    batches (Settings.train_seed, lecture.draw_batch's batch size), steps and rate."""
    params = {k: train[k].clone() for k in spec.EX4_PARAMETERS}
    g = torch.Generator().manual_seed(s.train_seed)
    for _ in range(s.train_steps):
        Xb, Yb = lecture.draw_batch(train["Xtr"], train["Ytr"], g)
        with torch.enable_grad():
            v = lecture.cross_entropy_forward(params, Xb, Yb, track=True)
            v["loss"].backward()
        params = {k: params[k] - grading.TRAINING_LR * v[k].grad for k in spec.EX4_PARAMETERS}
    return params


# ------------------------------------------------------------ the replay plan
@dataclass
class ReplayCell:
    label: str
    kind: str            # "locked", "answer", "added"
    grade_id: str | None
    source: str
    seeded: bool = False  # the judge changed it: it depends on the submission's seed


class _Reseed(ast.NodeTransformer):
    """The locked cells, as the instructor wrote them, with the judge's seed and batch size."""
    def __init__(self, seed: int, batch_size: int | None):
        self.seed, self.batch_size = seed, batch_size

    def visit_Constant(self, node):
        if node.value == lecture.LECTURE_SEED and type(node.value) is int:
            return ast.copy_location(ast.Constant(self.seed), node)
        return node

    def visit_Assign(self, node):
        if (self.batch_size and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id == "batch_size"):
            node.value = ast.copy_location(ast.Constant(self.batch_size), node.value)
        return self.generic_visit(node)


def reseed(source: str, seed: int, batch_size: int | None = None) -> str:
    tree = _Reseed(seed, batch_size).visit(ast.parse(strip_magics(source)))
    return ast.unparse(ast.fix_missing_locations(tree))


def replay_cells(cells, s: Settings) -> list[ReplayCell]:
    """What the replay runs, in notebook order: locked cells (re-seeded) but those that use
    autograd or only report, the answer cells, and every cell the student added."""
    out, last = [], "the top"
    for cell in cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        gid = meta.get("grade_id")
        if cell.get("cell_type") != "code":
            last = gid or last
            continue
        if meta.get("solution"):
            out.append(ReplayCell(gid, "answer", gid, cell["source"]))
        elif meta.get("grade"):
            pass  # test cells: the judge grades, not the cell
        elif meta.get("locked"):
            if gid not in spec.KERNEL_ONLY_CELLS:
                bs = s.batch_size if gid == spec.BATCH_CELL else None
                source = reseed(cell["source"], s.seed, bs)
                out.append(ReplayCell(gid, "locked", gid, source, seeded=source != reseed(cell["source"], s.seed + 1, bs)))
        else:
            out.append(ReplayCell(f"your cell after {last}", "added", None, cell["source"]))
        last = gid or last
    return out


def run_order() -> list[str]:
    """Runs in this order so that no run is handed the correct value of a gradient whose
    own run is still to come: the student's notebook as is, then one run per exercise-1
    gradient in backward order, exercise 3's (given dhpreact) before anything gets dhprebn."""
    names = [g.name for g in EX1 if lecture.upstream(g.target)]
    cut = names.index("dhprebn") + 1
    return ["main"] + [f"local:{x}" for x in names[:cut]] + ["ex3"] + [f"local:{x}" for x in names[cut:]]


# ------------------------------------------------------------ running it
@dataclass
class ReplayOutput:
    runs: dict[str, RunResult]
    seconds: float
    problem: str | None = None


def warm_prefix(cells: list[ReplayCell]) -> list[dict]:
    """The leading locked cells that do not depend on the seed: the same for every submission."""
    prefix = []
    for c in cells:
        if c.kind != "locked" or c.seeded or c.grade_id == spec.BATCH_CELL:
            break
        prefix.append(c.__dict__)
    return prefix


def handed(run: str, grads: dict) -> dict:
    """The correct values a run is given: none for the notebook as it is; every upstream
    gradient for a gradient's own rule; dhpreact for exercise 3."""
    kind, _, name = run.partition(":")
    if kind == "local":
        return {"d" + t: grads[t] for t in lecture.upstream(name[1:])}
    return {"dhpreact": grads["hpreact"]} if kind == "ex3" else {}


def run_replay(cells: list[ReplayCell], fresh: Fresh, s: Settings, *, names_txt: Path,
               launcher: Launcher = launch_plain) -> ReplayOutput:
    """The notebook as it is first; then, one request at a time and in run_order(), only
    the runs that can change a grade (a gradient that failed as it is gets judged on its own
    rule; exercise 3 always). Each run's result is read before the next run starts."""
    work = Path(tempfile.mkdtemp(prefix="replay-", dir=exchange_root()))
    try:
        os.chmod(work, 0o755)
        data_dir = work / "data"
        data_dir.mkdir()
        shutil.copy(names_txt, data_dir / "names.txt")
        os.chmod(data_dir / "names.txt", 0o444)  # the replay reads it; nobody may change it
        first = next((i for i, c in enumerate(cells) if c.kind == "answer"), len(cells))
        plan = {"cells": [c.__dict__ for c in cells], "first_answer": first, "data_dir": str(data_dir),
                "train_seed": s.train_seed, "train_steps": s.train_steps}
        (work / "plan.json").write_text(json.dumps(plan))
        torch.save({"ex4": fresh.ex4_inputs, "train": fresh.train}, work / "inputs.pt")
        server = server_for(warm_prefix(cells), launcher)
        t0 = time.perf_counter()
        problems, runs = [], {}
        timeout = s.run_timeout
        todo = ["main"]
        while todo:
            run = todo.pop(0)
            if time.perf_counter() - t0 > s.total_timeout:
                runs[run] = RunResult(f"not run: the submission's {s.total_timeout:g} s were used up")
                continue
            torch.save(handed(run, fresh.grads), work / "inject.pt")
            status, frame = server.replay(work, run=run, names_txt=names_txt, timeout=timeout)
            runs[run] = _load_run(frame, run, status, fresh)
            if status.startswith("timed out"):
                timeout = min(timeout, 5.0)  # a looping answer loops in every run: cap the rest
            if run == "main":
                failed = {g.name for g in EX1 if not _passes(runs["main"].value(f"{spec.ANSWER_CELLS[1]}/{g.name}"),
                                                             fresh.grads[g.target], g)}
                todo = [r for r in run_order()[1:] if r == "ex3" or r.partition(":")[2] in failed]
        (work / "inject.pt").unlink(missing_ok=True)
        runs.update({name: RunResult("skipped") for name in run_order() if name not in runs})
        problems = [f"run {k}: {r.status}" for k, r in runs.items() if r.status not in ("ok", "skipped")]
        return ReplayOutput(runs, time.perf_counter() - t0, "; ".join(problems) or None)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _passes(value, reference, gradient) -> bool:
    return compare(gradient.name, value, reference, zero_ok_reason=spec.ZERO_GRADIENTS.get(gradient.name)).ok


def _load_run(frame: bytes | None, name: str, status: str, fresh: Fresh) -> RunResult:
    """Run `name`'s result frame, validated (grader/results.py) before anything computes with it."""
    return results.parse_frame(frame, status, fresh.shapes)


# ------------------------------------------------------------ the verdicts
@dataclass
class Record:
    student: str
    seed: int
    verdicts: dict[str, grading.Verdict]
    findings: list[Finding]
    suspicious: list[str]
    replay_seconds: float
    problems: list[str]

    def to_json(self) -> dict:
        return {"student": self.student, "seed": self.seed, "replay_seconds": round(self.replay_seconds, 3),
                "score": sum(v.score for v in self.verdicts.values()),
                "max_score": sum(v.max_score for v in self.verdicts.values()),
                "problems": self.problems, "suspicious": self.suspicious,
                "findings": [f.text() for f in self.findings],
                "verdicts": {k: {"score": v.score, "max_score": v.max_score, "carried": v.carried,
                                 "hint": v.hint, "lines": v.lines} for k, v in self.verdicts.items()}}


def judge_submission(cells, *, student: str, settings: Settings, names_txt: Path,
                     in_kernel: dict[str, float] | None = None, sandbox: Sandbox | None = None) -> Record:
    """`sandbox`: run the replay inside it (the default for autograding); None runs it as a
    plain child process (tests of the judge's logic)."""
    fresh = fresh_inputs(dataset(names_txt), settings)
    plan = replay_cells(cells, settings)
    launcher = functools.partial(launch_sandboxed, sandbox=sandbox) if sandbox else launch_plain
    out = run_replay(plan, fresh, settings, names_txt=names_txt, launcher=launcher)
    try:
        with time_limit(settings.judge_seconds):
            verdicts = _verdicts(out, fresh, settings)
        overrun = None
    except JudgeTimeout as e:  # costs this submission only: the batch goes on
        overrun = str(e)
        verdicts = {g.grade_id: grading.Verdict(g.grade_id, 0.0, g.points, [overrun], hint=overrun,
                                                problem="judge_timeout") for g in spec.GRADED}
    findings = [f for c in plan if c.kind in ("answer", "added") for f in scan_source(c.label, c.source)]
    problems = [p for p in (out.problem, overrun) if p]
    suspicious = [f"{'tampering' if f.kind == 'tamper' else 'autograd or a file in an answer cell'}: {f.text()}"
                  for f in findings if f.serious]
    for gid, score in (in_kernel or {}).items():
        v = verdicts.get(gid)
        # a value the replay never got (a deleted cell, say) is not a sign of copying
        if v and score >= v.max_score and v.score < v.max_score and v.problem not in ("missing", "judge_timeout"):
            suspicious.append(f"{gid} matched autograd in the student's kernel but fails on fresh inputs")
    return Record(student, settings.seed, verdicts, findings, suspicious, out.seconds, problems)


def _verdicts(out: ReplayOutput, fresh: Fresh, s: Settings) -> dict[str, grading.Verdict]:
    main = out.runs["main"]
    names, aliases, n_at = main.meta.get("names", []), main.meta.get("aliases", []), main.meta.get("n_at", {})
    n = s.batch_size
    main_errors = main.meta.get("errors", [])
    verdicts: dict[str, grading.Verdict] = {}
    ex1_cell = spec.ANSWER_CELLS[1]
    main_ok = {}

    def hint_for(name, target, ref, branches=None, cell=None, errs=main_errors):
        def make(value):
            if value is MISSING and main.status not in ("ok", "skipped"):
                return f"the replay of your notebook stopped before this was computed: {main.status}"
            if value is MISSING:
                return hints.missing(name, names=names, errors=errs, cell=cell)
            if not isinstance(value, torch.Tensor):
                return value.message if isinstance(value, Unusable) else None
            return hints.value_hint(name, value, ref, n=n, branches=branches, aliases=aliases,
                                    mistakes=known_mistakes(name, fresh.values, fresh.grads),
                                    n_seen=n_at.get(cell) if cell else None)
        return make

    for g in EX1:
        ref = fresh.grads[g.target]
        value = main.value(f"{ex1_cell}/{g.name}")
        local_run = out.runs.get(f"local:{g.name}")
        local = local_run.value(g.name) if local_run and local_run.status != "skipped" else None
        parents = [f"d{c}" for c in lecture.consumers(g.target) if c != "loss"]
        wrong = [p for p in parents if not main_ok.get(p, True)]
        branches = fresh.branches.get(g.target) if len(lecture.consumers(g.target)) > 1 else None
        errs = main_errors + (local_run.meta.get("errors", []) if local_run else [])
        v = grading.decide(g, main=value, reference=ref, local=local, wrong_inputs=wrong,
                           carried_credit=s.carried_credit,
                           hint=hint_for(g.name, g.target, ref, branches, ex1_cell, errs))
        main_ok[g.name] = v.score == g.points and not v.carried
        verdicts[g.grade_id] = v

    ex2 = next(g for g in spec.GRADIENTS if g.exercise == 2)
    verdicts[ex2.grade_id] = grading.decide(
        ex2, main=main.value(f"{spec.ANSWER_CELLS[2]}/dlogits"), reference=fresh.grads["logits"],
        hint=hint_for("dlogits", "logits", fresh.grads["logits"], cell=spec.ANSWER_CELLS[2]))
    ex3 = next(g for g in spec.GRADIENTS if g.exercise == 3)
    r3 = out.runs["ex3"]
    verdicts[ex3.grade_id] = grading.decide(
        ex3, main=r3.value("dhprebn"), reference=fresh.grads["hprebn"],
        hint=hint_for("dhprebn", "hprebn", fresh.grads["hprebn"], cell=spec.ANSWER_CELLS[3],
                      errs=main_errors + r3.meta.get("errors", [])))
    if verdicts[ex3.grade_id].score == ex3.points:
        verdicts[ex3.grade_id].lines.append("judged with the correct dhpreact")

    ex4_error = main.meta.get("ex4_error") or (None if main.status == "ok" else f"the replay run {main.status}")
    for g in (g for g in spec.GRADIENTS if g.exercise == 4):
        ref = fresh.ex4_reference[g.target]
        v = grading.decide(g, main=main.value(f"ex4/{g.name}"), reference=ref,
                           hint=hint_for(g.name, g.target, ref))
        if ex4_error and v.score < v.max_score:
            v.lines, v.hint = [ex4_error], ex4_error
        verdicts[g.grade_id] = v
    verdicts[spec.TRAINING.grade_id] = _training_verdict(main, fresh, ex4_error)
    return verdicts


class JudgeTimeout(BaseException):
    """The judge's own checks of one submission ran out of time (a BaseException, so that no
    `except Exception` in the verdict code can swallow it)."""


@contextlib.contextmanager
def time_limit(seconds: float | None):
    """Raise JudgeTimeout in the block after `seconds` (SIGALRM). Signals reach the main thread
    only: elsewhere the block runs without a limit."""
    if not seconds or seconds <= 0 or threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_alarm(signum, frame):
        raise JudgeTimeout(f"the judge's own checks of this submission took over {seconds:g} s: "
                           "every grade is 0 (re-grade it on a less busy machine if that is wrong)")
    previous = signal.signal(signal.SIGALRM, on_alarm)
    outer, _ = signal.setitimer(signal.ITIMER_REAL, seconds)
    start = time.monotonic()
    try:
        yield
    finally:
        try:
            signal.setitimer(signal.ITIMER_REAL, 0)
        finally:  # even if the alarm fired just now
            signal.signal(signal.SIGALRM, previous)
            if outer:  # a timer of the caller's was running: give back what is left of it
                signal.setitimer(signal.ITIMER_REAL, max(outer - (time.monotonic() - start), 1e-3))


def _training_verdict(main: RunResult, fresh: Fresh, ex4_error: str | None) -> grading.Verdict:
    """The point needs learning: the student's trained net must beat every net that ignores its
    input and come close to what the kit's own backward reaches from the same start."""
    check = spec.TRAINING
    keys = {k: f"train/{k}" for k in spec.EX4_PARAMETERS}
    params = {k: main.tensors.get(key) for k, key in keys.items()}
    why: dict[str, list[str]] = {}    # the same reason once: seven identical views are one line
    for k, key in keys.items():
        if key in main.rejected:
            why.setdefault(main.rejected[key], []).append(k)
    unusable = [f"{', '.join(ks)} {'is' if len(ks) == 1 else 'are'} {r}" for r, ks in why.items()]
    problem = ex4_error or main.meta.get("train_error") or (
        f"the replay returned unusable trained parameters: {'; '.join(unusable)}" if unusable else None)
    if problem or any(p is None for p in params.values()):
        return grading.Verdict(check.grade_id, 0.0, check.points, [problem or "training produced no parameters"],
                               hint=problem)
    try:
        final = float(lecture.cross_entropy_forward(params, fresh.eval_X, fresh.eval_Y)["loss"])
    except Exception as e:  # results.py admits the exact shapes only: not expected
        return grading.Verdict(check.grade_id, 0.0, check.points, [f"the trained parameters are unusable: {e}"])
    ref, floor, most = fresh.reference_train_loss, fresh.context_free_loss, \
        fresh.reference_train_loss + grading.TRAINING_TOLERANCE
    lines = [f"trained with your manual_backward: loss {fresh.initial_eval_loss:.2f} -> {final:.2f} on "
             f"{EVAL_EXAMPLES} validation examples; the kit's reference backward reaches {ref:.2f} from the same start",
             f"to pass: below {floor:.2f} (the best any net that ignores its input can do) and at most "
             f"{most:.2f} ({grading.TRAINING_TOLERANCE:g} above the kit's)"]
    if not math.isfinite(final):
        hint = "the loss became NaN or inf: check the update's direction and the gradients' scale"
    elif final >= floor:
        hint = ("the net learned nothing from its input (at most how frequent each character is): "
                "check the update's direction and the gradients")
    elif final > most:
        hint = "the net learns far less than with the kit's backward: check the gradients' scale and sign"
    else:
        hint = None
    return grading.Verdict(check.grade_id, 0.0 if hint else check.points, check.points, lines, hint=hint)
