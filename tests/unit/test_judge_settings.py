"""grader/settings.py: the judge's settings (per-student seeds, the replay's limits from the
environment, the fields that are traits). The environment itself and report_dir:
test_unit_settings.py."""

from __future__ import annotations

from grader.settings import ENVIRONMENT, JudgeSettings, class_seed_for, seed_for, trait_settings


# ---------------------------------------------------------------- seed_for
def test_seed_for():
    a = seed_for("alice", "2024")
    assert a == seed_for("alice", "2024")
    assert isinstance(a, int) and a > 0
    assert a != seed_for("bob", "2024")
    assert a != seed_for("alice", "2025")
    seeds = {seed_for(f"s{i:02d}", "salt") for i in range(50)}
    assert len(seeds) == 50 and min(seeds) > 0


def test_the_training_run_is_the_classs():
    """Exercise 4's training run (start and batches) comes from the class's seed where there is
    one, the same for every student; the rest of the inputs from the student's."""
    c = class_seed_for("2024")
    assert c == class_seed_for("2024") != class_seed_for("2025") and c > 0
    assert c not in {seed_for(f"s{i:02d}", "2024") for i in range(50)}
    alice, bob = (JudgeSettings(seed=seed_for(s, "2024"), class_seed=c) for s in ("alice", "bob"))
    assert alice.seed != bob.seed
    assert (alice.train_start_seed, alice.train_seed) == (c + 2, c + 3)
    assert (bob.train_start_seed, bob.train_seed) == (c + 2, c + 3)
    alone = JudgeSettings(seed=7)  # no class (a student's own check): the student's seed
    assert (alone.training_seed, alone.train_start_seed, alone.train_seed) == (7, 9, 10)


# ---------------------------------------------------------------- JudgeSettings
def test_judge_settings_take_the_replays_limits_from_the_environment(monkeypatch):
    monkeypatch.setenv("BACKPROP_NINJA_STATEMENT_SECONDS", "2.5")
    monkeypatch.setenv("BACKPROP_NINJA_RUN_TMP_MB", "64")
    s = JudgeSettings(seed=7)
    assert (s.statement_seconds, s.run_tmp_mb) == (2.5, 64)
    assert s.train_seed == 10
    monkeypatch.delenv("BACKPROP_NINJA_STATEMENT_SECONDS")
    assert JudgeSettings(seed=7).statement_seconds == ENVIRONMENT["BACKPROP_NINJA_STATEMENT_SECONDS"][0]


def test_trait_settings_are_the_fields_with_a_help_text():
    names = [f.name for f in trait_settings()]
    assert names == [
        "batch_size",
        "run_timeout",
        "total_timeout",
        "train_steps",
        "carried_credit",
        "judge_seconds",
        "autograd_policy",
        "numeric_factor",
        "numeric_floor_seconds",
    ]
    assert all(f.metadata["help"] for f in trait_settings())
