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


def test_an_unsafe_tag_is_named_with_its_line(tmp_path):
    from grpo_dial.dag.config_checks import file_problem

    path = tmp_path / "c.yaml"
    path.write_text('x: 1\na: !!python/object/apply:os.system ["true"]\n')
    assert file_problem(path) == (
        f"config error in {path} (line 2): the tag "
        "'tag:yaml.org,2002:python/object/apply:os.system' is not allowed; config files are read "
        "with a safe loader (plain values only)"
    )


def test_config_problems_reach_the_merged_configs_values(tmp_path):
    from grpo_dial.dag.config_checks import config_problems

    path = tmp_path / "c.yaml"
    path.write_text("train: {}\n")
    line = config_problems({"train.lr": 1}, [path], {})
    assert line.startswith("config error at 'train.lr': keys are nested, not dotted")
