"""dag.config_checks: the typed-key walk and the value checks that mutation testing found
unpinned (docs/development.md#mutation-testing)."""

from __future__ import annotations

from grpo_dial.dag.config_checks import SEED_MAX, _typed_keys, value_problem

SCHEMA = {
    "type": "object",
    "properties": {
        "n": {"type": "integer"},
        "x": {"type": "number"},
        "either": {"type": ["integer", "string"]},
        "maybe": {"type": ["integer", "null"]},
    },
}


def test_typed_keys_leave_out_a_key_that_also_admits_text():
    assert list(_typed_keys(SCHEMA, "integer")) == [("n",), ("maybe",)]
    assert list(_typed_keys(SCHEMA, "number")) == [("n",), ("x",), ("maybe",)]


def test_a_scalar_seeds_value_out_of_range_is_refused():
    line = value_problem({"train": {"seeds": SEED_MAX + 1}}, {})
    assert line == (
        f"config error at 'train.seeds': seed {SEED_MAX + 1} is out of range; seeds are "
        f"integers 0..{SEED_MAX} (they name the run folders seed0, seed1, ...)"
    )
    assert value_problem({"train": {"seeds": SEED_MAX}}, {}) is None


def test_a_config_that_is_not_a_mapping_gives_no_value_problem():
    assert value_problem([], {}) is None
