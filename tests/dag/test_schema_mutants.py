"""dag.schema and dag.arms: the generated schema parts, null dials and the reference check's line
that mutation testing found unpinned (docs/development.md#mutation-testing)."""

from __future__ import annotations

import jsonschema
import pytest

from grpo_dial.dag import ConfigError
from grpo_dial.dag.arms import check_reference
from grpo_dial.dag.schema import allocation_schema, dial_entry_schema, drop_null_dials


def test_allocation_schema_refuses_unknown_keys():
    with pytest.raises(jsonschema.ValidationError, match="bogus"):
        jsonschema.validate({"bogus": 1}, allocation_schema(with_defaults=True))


def test_dial_entry_schema_refuses_unknown_keys_and_names_group_size_choices():
    entry = dial_entry_schema()
    assert entry["additionalProperties"] is False
    assert entry["properties"]["group_size"]["enum"] == ["uniform", "adaptive"]
    allocation = entry["properties"]["allocation"]["properties"]
    assert allocation and not any("default" in p for p in allocation.values())
    assert "default" in allocation_schema(with_defaults=True)["properties"]["g_max"]


def test_dials_null_switches_every_arm_off():
    config = {"dials": None}
    assert drop_null_dials(config) == []
    assert config == {"dials": {}}


def test_a_reference_outside_dials_lists_them():
    with pytest.raises(ConfigError) as error:
        check_reference("channel.reference", "dapo", {"grpo": None, "a": None})
    assert str(error.value) == (
        "config error at 'channel.reference': 'dapo' is not in dials ['a', 'grpo']"
    )
