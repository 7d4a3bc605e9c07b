"""grader/replay/results.py and tensors.py in-process: a run's result frame is checked before
anything computes with it (size, the RunRecord schema, the tensor archive's layout, then each
tensor). No replay server, no nbgrader, no kernel."""

from __future__ import annotations

import io
import json
import resource
import struct
import time
import zipfile

import pytest
import torch

from grader.exercise import spec
from grader.exercise.compare import MISSING, Foreign
from grader.replay import results
from grader.replay.results import RunResult, expected_shapes
from grader.replay.tensors import MAX_ENTRY_BYTES, MAX_NAME
from grader.untrusted.protocol import MAX_FRAME_BYTES, MAX_OWN
from grader.verdicts.training import training_verdict

from replay_runs import EX1, frame, honest_runs, one, parse


# ---------------------------------------------------------------- expected shapes
def test_expected_shapes_come_from_the_references(fresh):
    shapes = expected_shapes(fresh)
    for g in EX1:
        assert shapes[f"{spec.ANSWER_CELLS[1]}/{g.name}"].shape == tuple(fresh.grads[g.target].shape)
        assert shapes[g.name] == shapes[f"{spec.ANSWER_CELLS[1]}/{g.name}"]
    assert shapes["ex2_solution/dlogits"].shape == tuple(fresh.grads["logits"].shape)
    assert (
        shapes["ex3_solution/dhprebn"].shape == shapes["dhprebn"].shape == tuple(fresh.grads["hprebn"].shape)
    )
    for k in spec.PARAMETERS:
        assert (
            shapes[f"ex4/d{k}"].shape == tuple(fresh.ex4_reference[k].shape) and not shapes[f"ex4/d{k}"].exact
        )
        assert shapes[f"train/{k}"].shape == tuple(fresh.train[k].shape) and shapes[f"train/{k}"].exact
    # a rename's tensors: any shape no bigger than the forward pass's largest tensor
    own = [shapes[f"own/{i}"] for i in range(MAX_OWN)]
    assert all(
        not e.exact and e.limit == max(t.numel() for t in fresh.values.values() if hasattr(t, "numel"))
        for e in own
    )
    assert len(shapes) == 2 * len(EX1) + 2 * len(spec.PARAMETERS) + 2 + MAX_OWN


# ---------------------------------------------------------------- whole frames
def test_an_honest_frame_passes(fresh):
    runs = honest_runs(fresh)
    main = runs["main"]
    assert main.status == "ok" and not main.rejected
    key = f"{spec.ANSWER_CELLS[1]}/dW1"
    assert torch.equal(main.value(key), fresh.grads["W1"])
    assert type(main.value(key)) is torch.Tensor
    assert main.meta["seconds"] == 1.0 and main.meta["errors"] == []
    assert set(main.tensors) == set(main.meta["values"])


def test_a_joint_run_stands_for_each_of_its_gradients_runs(fresh):
    """plan.joint_runs' "local:dh+dW2+db2": each gradient gets the run's status, record and CPU,
    with its own value only (and the student's own names, OWN/i, which any of them may hold)."""
    values = {"dh": {"kind": "tensor"}, "dW2": {"kind": "none"}, "db2": {"kind": "tensor"}}
    values["own/0"] = {"kind": "tensor"}
    dh = fresh.grads["h"].clone()
    tensors = {"dh": dh, "db2": dh[0], "own/0": fresh.grads["W2"]}  # db2 shares dh's memory
    meta = {"values": values, "errors": [{"cell": "ex1", "line": 2, "error": "E", "assigns": []}]}
    meta["own"] = ["mine"]
    joint = results.parse_frame(frame(meta, tensors), "ok", expected_shapes(fresh), cpu=0.25)
    assert set(joint.rejected) == {"db2"}  # refused: for db2's run only
    each = results.each_gradients("local:dh+dW2+db2", joint)
    assert list(each) == ["local:dh", "local:dW2", "local:db2"]
    assert torch.equal(each["local:dh"].value("dh"), fresh.grads["h"])
    assert each["local:dW2"].value("dW2") is None and each["local:dW2"].value("dh") is MISSING
    assert set(each["local:db2"].rejected) == {"db2"} and not each["local:dh"].rejected
    for run in each.values():
        assert (run.status, run.cpu, run.meta["own"]) == ("ok", 0.25, ["mine"])
        assert run.meta["errors"] == meta["errors"]
        assert torch.equal(run.value("own/0"), fresh.grads["W2"])
    assert results.each_gradients("local:dh", joint) == {"local:dh": joint}
    assert results.each_gradients("ex3", joint) == {"ex3": joint}


def test_unknown_keys_are_dropped(fresh):
    r = parse(
        fresh,
        {
            "values": {"dW1": {"kind": "tensor"}, "evil": {"kind": "tensor"}},
            "extra": [1] * 10,
            "names": ["a"],
        },
        {"dW1": fresh.grads["W1"], "evil": torch.zeros(3)},
    )
    assert set(r.tensors) == {"dW1"} and set(r.meta["values"]) == {"dW1"}
    assert "extra" not in r.meta and r.meta["names"] == ["a"]


@pytest.mark.parametrize(
    "status,expected",
    [("ok", "ended without a result (exit or crash)"), ("timed out after 30 s", "timed out after 30 s")],
)
@pytest.mark.parametrize("empty", [None, b""])
def test_no_frame(fresh, empty, status, expected):
    r = results.parse_frame(empty, status, expected_shapes(fresh))
    assert (r.status, r.meta, r.tensors) == (expected, {}, {})
    assert r.value("dW1") is MISSING


BAD_FRAMES = {
    "truncated": b"\x00\x00",
    "meta longer than the frame": struct.pack(">I", 100) + b"{}",
    "meta longer than allowed": struct.pack(">I", results.MAX_META_BYTES + 1) + b"{}" * 10,
    "not JSON": struct.pack(">I", 3) + b"{x}",
    "not UTF-8": struct.pack(">I", 2) + b"\xff\xfe",
    "a JSON list": struct.pack(">I", 2) + b"[]",
    "deeply nested JSON": struct.pack(">I", 200000) + b"[" * 100000 + b"]" * 100000,
    "tensors not a zip": frame({}, blob=b"PK not a zip at all"),
}


@pytest.mark.parametrize("name", BAD_FRAMES)
def test_malformed_frames_cost_the_run(fresh, name):
    r = results.parse_frame(BAD_FRAMES[name], "ok", expected_shapes(fresh))
    assert r.status.startswith("returned an unusable result (") and r.meta == {} and r.tensors == {}
    # a run that was stopped keeps its own status
    assert (
        results.parse_frame(BAD_FRAMES[name], "killed by signal 9", expected_shapes(fresh)).status
        == "killed by signal 9"
    )


@pytest.mark.parametrize(
    "meta",
    [
        {"values": []},
        {"values": {"dW1": "tensor"}},
        {"values": {"dW1": {"kind": "sneaky"}}},
        {"names": "dW1"},
        {"names": [1]},
        {"aliases": [["a"]]},
        {"aliases": [[1, 2]]},
        {"n_at": []},
        {"n_at": {"ex1_solution": [32]}},
        {"errors": {}},
        {"errors": [{"line": "7"}]},
        {"errors": [{"assigns": "dW1"}]},
        {"ex4_error": 5},
        {"train_error": ["x"]},
        {"seconds": "1"},
        {"seconds": float("nan")},
        {"seconds": -1.0},
        {"seconds": 10**400},
        {"partial": 1},
    ],
    ids=lambda m: json.dumps(m)[:40],
)
def test_meta_of_the_wrong_types_costs_the_run(fresh, meta):
    r = parse(fresh, meta, {"dW1": fresh.grads["W1"]})
    assert r.status.startswith("returned an unusable result (") and r.tensors == {}


def test_meta_strings_and_lists_are_bounded(fresh):
    error = {"cell": "c" * 5000, "line": 1, "error": "e" * 10**5, "assigns": ["x"] * 5000}
    meta = {
        "names": [f"n{i}" for i in range(5000)],
        "errors": [error] + [{"line": None}] * 3000,
        "ex4_error": "x" * 10**5,
        "values": {"dW1": {"kind": "other", "type": "t" * 5000}},
        "n_at": {"ex1_solution": "n" * 1000, "ex2_solution": 16, **{f"k{i}": 1 for i in range(100)}},
    }
    r = parse(fresh, meta)
    assert r.status == "ok"
    m = r.meta
    assert len(m["names"]) == results.MAX_NAMES and len(m["errors"]) == results.MAX_ERRORS
    e = m["errors"][0]
    assert len(e["cell"]) == MAX_NAME and len(e["error"]) == results.MAX_STR
    assert len(e["assigns"]) == results.MAX_NAMES
    assert len(m["ex4_error"]) == results.MAX_STR and len(m["values"]["dW1"]["type"]) == MAX_NAME
    assert len(m["n_at"]) == results.MAX_N_AT and m["n_at"]["ex2_solution"] == 16
    assert len(m["n_at"]["ex1_solution"]) == 40


def test_a_frame_over_the_size_limit_is_refused_unread(fresh):
    big = b"\x00" * (MAX_FRAME_BYTES + 1)
    assert results.parse_frame(big, "ok", expected_shapes(fresh)).status.startswith(
        "returned an unusable result"
    )


def _rezip(blob: bytes, compression=zipfile.ZIP_STORED, extra: int = 0, edit=None) -> bytes:
    """torch.save's archive written again by zipfile; `edit(name, data)` -> (data, compression)."""
    src, out = zipfile.ZipFile(io.BytesIO(blob)), io.BytesIO()
    with zipfile.ZipFile(out, "w", compression) as dst:
        for info in src.infolist():
            data, how = edit(info.filename, src.read(info)) if edit else (src.read(info), compression)
            dst.writestr(info.filename, data, compress_type=how)
        for i in range(extra):
            dst.writestr(f"archive/junk/{i}", b"")
    return out.getvalue()


def _blob(tensors: dict) -> bytes:
    buf = io.BytesIO()
    torch.save(tensors, buf)
    return buf.getvalue()


def test_a_deflated_archive_is_read_with_a_bound(fresh):
    # torch.save never compresses; inflating is bounded here, never left to torch.load
    blob = _rezip(_blob({"dW1": fresh.grads["W1"], "db2": fresh.grads["b2"]}), zipfile.ZIP_DEFLATED)
    r = parse(fresh, {"values": {"dW1": {"kind": "tensor"}}}, blob=blob)
    assert torch.equal(r.tensors["dW1"], fresh.grads["W1"]) and torch.equal(
        r.tensors["db2"], fresh.grads["b2"]
    )


def test_a_deflate_bomb_costs_its_own_keys(fresh):
    """Like hostile case h36: the training results' records inflate to 64 MiB each (64 kB on
    the wire), one of them also declared 2**25 elements; the other results are kept."""
    tensors = {
        "ex1_solution/dW1": fresh.grads["W1"],
        "train/W1": torch.zeros(30, 200),
        "train/b2": torch.zeros(12345),
    }

    def bomb(name, data):
        if name.endswith("data.pkl"):
            return data.replace(b"M90", b"J" + struct.pack("<i", 2**25)), zipfile.ZIP_DEFLATED
        if len(data) in (4 * 6000, 4 * 12345):
            return bytes(64 << 20), zipfile.ZIP_DEFLATED
        return data, zipfile.ZIP_STORED

    blob = _rezip(_blob(tensors), edit=bomb)
    assert len(blob) < 300_000
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    r = parse(fresh, {}, blob=blob)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss < 100 * 1024  # kB
    assert r.status == "ok" and set(r.tensors) == {"ex1_solution/dW1"}
    assert torch.equal(r.tensors["ex1_solution/dW1"], fresh.grads["W1"])
    assert r.rejected["train/W1"] == f"float32 (30, 200), whose data is over {MAX_ENTRY_BYTES} bytes"
    assert r.rejected["train/b2"] == "float32 (33554432,), expected (27,)"


def test_other_compressions_and_bad_crcs_cost_their_keys(fresh):
    def bzip(name, data):
        return data, (zipfile.ZIP_BZIP2 if len(data) == 4 * 30 * 64 else zipfile.ZIP_STORED)

    blob = _rezip(_blob({"dW1": torch.zeros(30, 64), "db2": fresh.grads["b2"]}), edit=bzip)
    r = parse(fresh, {}, blob=blob)
    assert set(r.tensors) == {"db2"} and "compressed in a way torch.save never writes" in r.rejected["dW1"]
    good = _blob({"dW1": torch.zeros(30, 64), "db2": fresh.grads["b2"]})
    at = good.index(bytes(4 * 30 * 64))  # flip a byte of dW1's data: its CRC no longer holds
    r = parse(fresh, {}, blob=good[:at] + b"\x01" + good[at + 1 :])
    assert set(r.tensors) == {"db2"} and "is unreadable (BadZipFile)" in r.rejected["dW1"]
    # the index compressed otherwise: nothing loads
    assert "index is compressed" in parse(fresh, {}, blob=_rezip(good, zipfile.ZIP_BZIP2)).status


def test_too_many_archive_entries_are_refused(fresh):
    blob = _rezip(_blob({"dW1": torch.zeros(30, 64)}), extra=len(expected_shapes(fresh)) + 10)
    assert "entries" in parse(fresh, {}, blob=blob).status


def test_a_huge_pickle_is_refused(fresh):
    blob = _blob({"dW1": fresh.grads["W1"], "names": [f"{i:0100d}" for i in range(5000)]})
    assert "index is over" in parse(fresh, {}, blob=blob).status


def test_code_in_the_pickle_does_not_run(fresh):
    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    r = parse(fresh, {}, blob=_blob({"dW1": Evil()}))
    assert "do not load" in r.status


# ---------------------------------------------------------------- one tensor at a time
def test_expanded_view_is_refused_without_memory(fresh):
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    views = {f"train/{k}": torch.zeros(1).expand(2**28) for k in spec.PARAMETERS}
    t0 = time.perf_counter()
    r = parse(fresh, {}, views)
    assert time.perf_counter() - t0 < 2.0
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss < 200 * 1024  # kB: no GiBs
    assert r.tensors == {} and set(r.rejected) == set(views)
    assert (
        r.rejected["train/W1"] == "float32 (268435456,), not a compact tensor of its own (4 bytes of storage)"
    )
    v = training_verdict(r, fresh, None)
    assert v.score == 0 and v.lines == [
        "the replay returned unusable trained parameters: C, W1, b1, W2, b2, bngain, "
        "bnbias are float32 (268435456,), not a compact tensor of its own (4 bytes of storage)"
    ]


@pytest.mark.parametrize(
    "make,reason",
    [
        (lambda s: torch.zeros(s, dtype=torch.float16), "float16 (30, 64)"),
        (lambda s: torch.zeros(s, dtype=torch.float64), "float64 (30, 64)"),
        (lambda s: torch.zeros(s, dtype=torch.int64), "int64 (30, 64)"),
        (lambda s: torch.nn.Parameter(torch.zeros(s)), "a Parameter, not a plain tensor"),
        (
            lambda s: torch.zeros(s[::-1]).t(),
            "float32 (30, 64), not a compact tensor of its own (7680 bytes of storage)",
        ),
        (lambda s: torch.zeros(30 * 64 + 5)[5:].view(s), "not a compact tensor of its own (7700 bytes"),
        (lambda s: torch.zeros(2, *s)[0], "not a compact tensor of its own (15360 bytes"),
        (lambda s: torch.zeros(s).requires_grad_(), "with autograd or view flags"),
        (lambda s: torch.zeros(s).to_sparse(), "a torch.sparse_coo tensor"),
        (lambda s: [1.0, 2.0], "a list, not a plain tensor"),
    ],
    ids=[
        "float16",
        "float64",
        "int64",
        "parameter",
        "transposed-view",
        "offset",
        "oversized-storage",
        "requires-grad",
        "sparse",
        "list",
    ],
)
def test_unusable_tensors_cost_their_key_only(fresh, make, reason):
    key = f"{spec.ANSWER_CELLS[1]}/dW1"
    good = f"{spec.ANSWER_CELLS[1]}/db2"
    r = parse(
        fresh,
        {"values": {key: {"kind": "tensor"}, good: {"kind": "tensor"}}},
        {key: make((30, 64)), good: fresh.grads["b2"]},
    )
    assert r.status == "ok" and set(r.tensors) == {good}
    assert reason in r.rejected[key]
    value = r.value(key)
    assert isinstance(value, results.Unusable) and isinstance(value, Foreign)
    assert value.message == f"the replay returned an unusable value for dW1: {r.rejected[key]}"


class Sneaky(torch.Tensor):
    pass


def test_a_subclass_the_loader_does_not_know_costs_the_run(fresh):
    r = parse(fresh, {}, {"dW1": torch.zeros(30, 64).as_subclass(Sneaky)})
    assert "do not load" in r.status


def test_a_shared_storage_counts_once(fresh):
    t = fresh.grads["b2"].clone()
    r = parse(fresh, {}, {"db2": t, "ex1_solution/db2": t})
    assert set(r.tensors) == {"db2"} and "shares its memory with db2" in r.rejected["ex1_solution/db2"]


def test_loaded_tensors_are_fresh_copies(fresh):
    r = one(fresh, "dW1", fresh.grads["W1"])
    t = r.tensors["dW1"]
    assert type(t) is torch.Tensor and t.is_contiguous() and not t.requires_grad
    assert t.untyped_storage().nbytes() == 4 * t.numel()


@pytest.mark.parametrize(
    "key,shape,ok",
    [
        ("ex1_solution/dW2", (64, 27), True),  # the reference shape
        ("ex1_solution/dW2", (27, 64), True),  # transposed: the hint says so
        ("ex1_solution/dbngain", (64,), True),  # keepdim forgotten: accepted by compare
        ("ex1_solution/dbngain", (32, 1), True),  # summed over the wrong axis: the hint says so
        ("ex1_solution/db2", (32,), True),  # the same, bigger than the reference
        ("ex1_solution/db2", (32, 27), True),  # not summed at all
        ("dhprebn", (1, 32, 64), True),
        ("ex1_solution/db2", (1, 1, 1, 1, 27), False),  # more than 4 dims
        ("ex1_solution/dW2", (1000, 1000), False),  # far bigger than anything in the net
        ("ex4/dW1", (30, 200), True),
        ("ex4/dW1", (200, 30), True),  # exercise 4's gradients: as exercise 1's
        ("ex4/dbngain", (200,), True),  # keepdim forgotten: accepted by compare
        ("ex4/db2", (32,), True),
        ("ex4/dW1", (300, 300), False),
        ("train/W1", (30, 201), False),  # trained parameters: exactly the parameter's shape
        ("train/bngain", (200,), False),
        ("train/b2", (27,), True),
    ],
)
def test_shapes(fresh, key, shape, ok):
    r = one(fresh, key, torch.zeros(shape))
    assert (key in r.tensors) == ok
    if not ok:
        assert r.rejected[key] == f"float32 {shape}, expected {expected_shapes(fresh)[key].shape}"


# ---------------------------------------------------------------- RunResult.value
def test_run_result_value():
    t = torch.arange(3.0)
    r = RunResult(
        "ok",
        {
            "values": {
                "a": {"kind": "missing"},
                "b": {"kind": "none"},
                "c": {"kind": "other", "type": "list"},
                "d": {"kind": "tensor"},
                "e": {"kind": "tensor"},
                "f": {"kind": "other"},
            }
        },
        {"d": t},
    )
    assert r.value("a") is MISSING
    assert r.value("b") is None
    c = r.value("c")
    assert isinstance(c, Foreign) and c.type_name == "list"
    assert r.value("d") is t
    assert r.value("e") is MISSING  # said tensor, wrote none
    assert r.value("f").type_name == "?"
    assert r.value("not_there") is MISSING
    assert RunResult("did not run").value("d") is MISSING
