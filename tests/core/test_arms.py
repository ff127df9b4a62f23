"""Reading a `dials.<name>` entry: the dial through dial_from_config, the allocation from
train.allocation overridden by the dial's own, and one error line for a key of neither."""

from __future__ import annotations

from pathlib import Path

import pytest

from grpo_dial.core.allocation import SETTING_KEYS, Allocation
from grpo_dial.core.dial import ARM_KEYS, Dial, dial_keys, preset, read_arm
from grpo_dial.dag.schema import read_schema

SCHEMA = Path(__file__).parents[2] / "workflow" / "schemas" / "config.schema.yaml"
DEFAULTS = {"signal": "grpo", "g_min": 2, "g_max": 32, "unanimous": "minimum",
            "prior_strength": 8, "decay": 0.8}  # fmt: skip


def test_a_plain_dial_is_its_preset_with_uniform_groups():
    dial, allocation, _ = read_arm({"preset": "dapo", "clip_high": 0.3}, DEFAULTS)
    assert dial == preset("dapo").replace(clip_high=0.3)
    assert allocation == Allocation(scheme="uniform")
    assert read_arm({}) == (Dial(), Allocation(), "own")


def test_adaptive_arm_overrides_the_defaults_key_by_key():
    spec = {"preset": "dr_grpo", "group_size": "adaptive", "allocation": {"signal": "dr_grpo",
            "g_max": 8}}  # fmt: skip
    dial, allocation, _ = read_arm(spec, DEFAULTS, max_new_tokens=48)
    assert dial == preset("dr_grpo").replace(max_length=48)  # constant normalizer: L_max
    assert allocation == Allocation(
        scheme="adaptive", signal="dr_grpo", g_min=2, g_max=8, unanimous="minimum",
        prior_strength=8, decay=0.8,
    )  # fmt: skip
    assert DEFAULTS["g_max"] == 32 and spec["allocation"] == {"signal": "dr_grpo", "g_max": 8}


def test_max_length_is_set_only_for_the_constant_normalizer_and_only_when_unset():
    assert read_arm({"preset": "grpo"}, max_new_tokens=48)[0].max_length is None
    assert read_arm({"preset": "dr_grpo"})[0].max_length is None
    assert read_arm({"preset": "dr_grpo", "max_length": 10}, max_new_tokens=48)[0].max_length == 10


@pytest.mark.parametrize(
    "spec, defaults, message",
    [
        ({"preset": "grpo", "g_max": 8}, None,
         "unknown dial key 'g_max'; valid keys: preset, std_power, .* group_size, allocation, "
         "backend$"),
        ({"allocation": {"gmax": 8}}, None,
         "unknown dial allocation key 'gmax'; valid keys: signal, g_min, g_max, unanimous, "
         "prior_strength, decay$"),
        ({}, {"per_prompt_budget": 8}, "unknown train.allocation key 'per_prompt_budget'"),
        ({"group_size": 8}, None, "scheme=8 is not valid; choose one of 'uniform', 'adaptive'"),
        ({"preset": "ppo"}, None, "unknown preset 'ppo'"),
        ({"allocation": {"decay": 0}}, None, "decay must be in"),
    ],
)  # fmt: skip
def test_bad_entries_raise_one_line_naming_the_valid_keys(spec, defaults, message):
    with pytest.raises(ValueError, match=message) as info:
        read_arm(spec, defaults)
    assert "\n" not in str(info.value)


def test_every_key_the_schema_allows_in_a_dial_is_read():
    schema = read_schema(SCHEMA)
    dials = schema["properties"]["dials"]["additionalProperties"]["properties"]
    assert set(dials) == {*dial_keys(), *ARM_KEYS}
    assert set(dials["allocation"]["properties"]) == set(SETTING_KEYS)
    train_allocation = schema["properties"]["train"]["properties"]["allocation"]["properties"]
    assert set(train_allocation) == set(SETTING_KEYS)
