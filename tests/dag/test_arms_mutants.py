"""dag.arms and core.dial's arm fields: the key each refusal names and the backend's field,
pinned where mutation testing found them unpinned (docs/development.md#mutation-testing)."""

from __future__ import annotations

import pytest

from grpo_dial.core.dial import arm_fields, arm_from_fields
from grpo_dial.core.settings import SettingError
from grpo_dial.dag import ConfigError
from grpo_dial.dag.arms import resolve_arms

TRAIN = {"allocation": {"g_max": 16}, "max_new_tokens": 24}


def refusal(dials: dict, train: dict | None = None) -> str:
    with pytest.raises(ConfigError) as error:
        resolve_arms({"dials": dials, "train": train or TRAIN})
    return str(error.value)


def test_a_bad_allocation_default_is_blamed_on_train_allocation_and_its_field():
    line = refusal({"grpo": {"preset": "grpo"}}, {**TRAIN, "allocation": {"g_min": 0}})
    assert line.startswith("config error at 'train.allocation.g_min': g_min must be")


def test_a_long_arm_name_is_shown_by_its_first_40_characters():
    name = "a" * 39 + "bc" + "d" * 60
    line = refusal({name: {"preset": "grpo"}})
    assert line.startswith(f"config error at 'dials.{'a' * 39 + 'b'!r}': an arm's name is 1 to 64")


def test_an_unknown_key_of_an_arm_is_blamed_on_the_arm():
    line = refusal({"grpo": {"preset": "grpo", "bogus": 1}})
    assert line.startswith("config error at 'dials.grpo': ")
    assert "bogus" in line


def test_arm_fields_carry_the_backend_and_a_bad_one_is_named():
    arms = resolve_arms({"dials": {"t": {"preset": "grpo", "backend": "trl"}}, "train": TRAIN})
    fields = arm_fields(arms["t"])
    assert fields["backend"] == "trl"
    assert arm_from_fields(fields).backend == "trl"
    with pytest.raises(SettingError) as error:
        arm_from_fields({**fields, "backend": "jax"})
    assert error.value.name == "backend"
    assert str(error.value).startswith("backend='jax' is not valid")


def test_arm_fields_without_a_backend_read_as_own():
    arms = resolve_arms({"dials": {"g": {"preset": "grpo"}}, "train": TRAIN})
    fields = {k: v for k, v in arm_fields(arms["g"]).items() if k != "backend"}
    assert arm_from_fields(fields).backend == "own"
