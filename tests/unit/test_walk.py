"""tests/walk.py, the judge's walk through the kit's files: its counts on a walk made up here."""

from __future__ import annotations

import walk


def test_a_call_back_into_a_running_file_is_a_climb(tmp_path):
    kit = tmp_path / "kit"
    (kit / "grader" / "a").mkdir(parents=True)
    (kit / "grader" / "b").mkdir()
    (kit / "grader" / "a" / "one.py").write_text("def top(cb):\n    return cb()\n")
    (kit / "grader" / "b" / "two.py").write_text(
        "def down(top):\n    return top(lambda: 1) + leaf()\n\ndef leaf():\n    return 1\n"
    )
    ns_one, ns_two = {}, {}
    exec(compile((kit / "grader/a/one.py").read_text(), str(kit / "grader/a/one.py"), "exec"), ns_one)
    exec(compile((kit / "grader/b/two.py").read_text(), str(kit / "grader/b/two.py"), "exec"), ns_two)
    calls = walk.trace(kit, lambda: ns_two["down"](ns_one["top"]))
    # b's down calls a's top (a call), which calls b's lambda while b's down still runs (a climb)
    assert ("b/two.py:down", "a/one.py:top", False) in calls
    assert ("a/one.py:top", "b/two.py:<lambda>", True) in calls
    assert ("b/two.py:down", "b/two.py:leaf", False) not in calls  # inside one file: no call
    assert walk.stays(calls) == ["a", "b"]
    assert walk.summary(calls).splitlines()[0] == "files 2, calls 2, climbs 1, stays 2"


def test_leaves_are_not_stays():
    calls = [
        ("verdicts/judge.py:f", "exercise/spec.py:g", False),
        ("verdicts/judge.py:f", "replay/run.py:h", False),
        ("replay/run.py:h", "settings.py:env", False),
        ("verdicts/judge.py:f", "verdicts/outcomes.py:k", False),
        ("verdicts/judge.py:f", "replay/run.py:h", False),  # read once already
    ]
    assert walk.stays(calls) == ["replay", "verdicts"]
