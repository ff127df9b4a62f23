"""dial_from_config reads a dial only: an arm's allocation keys are refused, by name."""

from __future__ import annotations

import pytest

from grpo_dial.core.dial import dial_from_config, read_arm


@pytest.mark.parametrize(
    ("key", "value"),
    [("group_size", "adaptive"), ("allocation", {"g_max": 8}), ("backend", "trl")],
)
def test_an_arm_only_key_is_refused_not_ignored(key, value):
    entry = {"preset": "dr_grpo", key: value}
    with pytest.raises(ValueError, match=f"unknown dial key '{key}'") as error:
        dial_from_config(entry)
    assert "\n" not in str(error.value)
    # the same entry is an arm: read_arm takes the key beside the dial
    arm = read_arm(entry)
    assert (arm.dial.std_power, arm.dial.length_norm) == (0.0, "constant")


def test_the_dial_keys_still_read():
    dial = dial_from_config({"preset": "dr_grpo", "std_power": 0.5, "eps": 0.001})
    assert (dial.std_power, dial.eps, dial.length_norm) == (0.5, 0.001, "constant")
