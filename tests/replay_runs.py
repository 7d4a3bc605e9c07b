"""Replay runs built in-process, for the tests of what the judge does with them
(tests/unit/replay/test_results.py, tests/unit/verdicts/): result frames as a run sends them,
the replay's own training loop, and every run of an honest, correct submission."""

from __future__ import annotations

import io
import json
import struct

import torch

from grader.exercise import spec
from grader.replay.plan import AS_SUBMITTED, run_order, training_plan
from grader.replay.results import RunResult, expected_shapes, parse_frame
from grader.settings import JudgeSettings
from grader.untrusted.frames import encode_frame
from grader.untrusted.runner import Runner

from conftest import JUDGE_SEED, manual_backward

EX1 = [g for g in spec.GRADIENTS if g.exercise == 1]


def frame(meta: dict, tensors: dict | None = None, blob: bytes | None = None) -> bytes:
    """A frame as the replay sends it, or with the tensor archive's bytes given."""
    meta_json = json.dumps(meta).encode()
    if blob is None:
        buf = io.BytesIO()
        torch.save(tensors or {}, buf)
        blob = buf.getvalue()
    return struct.pack(">I", len(meta_json)) + meta_json + blob


def parse(fresh, meta=None, tensors=None, blob=None, status="ok") -> RunResult:
    return parse_frame(frame(meta or {}, tensors, blob), status, expected_shapes(fresh))


def one(fresh, key: str, t) -> RunResult:
    return parse(fresh, {"values": {key: {"kind": "tensor"}}}, {key: t})


def trained(fresh, backward, seed=JUDGE_SEED) -> dict:
    """What the replay's training loop (Runner._train) returns for this backward."""
    settings = JudgeSettings(seed=seed)
    plan = {
        "cells": [],
        "first_answer": 0,
        "train_seed": settings.train_seed,
        "train_steps": settings.train_steps,
        "training": training_plan(spec.NINJA),
    }
    meta, tensors = {}, {}
    with torch.no_grad():
        Runner(plan, {"train": fresh.train})._train(backward, meta, tensors)
    assert not meta, meta
    return tensors


def honest_runs(fresh) -> dict[str, RunResult]:
    """Every run as an honest, correct submission's replay would return it, through frames."""
    shapes = expected_shapes(fresh)
    c1, c2 = (spec.ANSWER_CELLS[i] for i in (1, 2))
    tensors = {f"{c1}/{g.name}": fresh.grads[g.target] for g in EX1}
    tensors[f"{c2}/dlogits"] = fresh.grads["logits"].clone()  # the replay sends a copy per name
    tensors.update({f"ex4/d{k}": fresh.ex4_reference[k] for k in spec.PARAMETERS})
    tensors.update(trained(fresh, manual_backward))
    meta = {
        "values": {k: {"kind": "tensor"} for k in tensors},
        "names": [],
        "aliases": [],
        "n_at": {},
        "errors": [],
        "seconds": 1.0,
    }
    main = parse_frame(encode_frame(meta, tensors), "ok", shapes)
    ex3 = parse_frame(
        encode_frame({"values": {"dhprebn": {"kind": "tensor"}}}, {"dhprebn": fresh.grads["hprebn"]}),
        "ok",
        shapes,
    )
    runs = {name: RunResult("skipped") for name in run_order()}
    runs.update({AS_SUBMITTED: main, "ex3": ex3})
    return runs
