"""dag.config_checks and the generated schema parts: text that is not a number, a dial field
given as text, the YAML error's line and the group-of-one line."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest
import yaml

from grpo_dial.core.allocation import Allocation
from grpo_dial.dag.config_checks import file_problem, value_problem
from grpo_dial.dag.schema import config_error, dial_entry_schema, read_schema

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = read_schema(ROOT / "workflow" / "schemas" / "config.schema.yaml")


@pytest.mark.parametrize("text", ["+inf", "Infinity", "nan"])
def test_text_infinities_are_left_to_the_schema(text):
    assert value_problem({"train": {"lr": text}}, SCHEMA) is None
    assert "is text, not a number" in value_problem({"train": {"lr": "5"}}, SCHEMA)


def test_a_dial_field_given_as_text_is_named():
    got = value_problem({"dials": {"x": {"std_power": "0.5"}}}, SCHEMA)
    assert got.startswith("config error at 'dials.x.std_power': '0.5' is text, not a number")
    got = value_problem({"dials": {"x": {"allocation": {"g_max": 4.0}}}}, SCHEMA)
    assert got == "config error at 'dials.x.allocation.g_max': 4.0 must be an integer; write 4"


def test_invalid_yaml_is_one_line_of_yamls_own_error(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("a: [1, 2\nb: 3\n")
    with pytest.raises(yaml.YAMLError) as err:
        yaml.safe_load(path.read_text())
    lines = [x.strip() for x in str(err.value).strip().splitlines()]
    assert file_problem(path) == f"config error in {path}: not valid YAML: {' '.join(lines)}"


def test_a_group_of_one_is_refused():
    assert value_problem({"length_bias": {"group_size": 1}}, SCHEMA) == (
        "config error at 'length_bias.group_size': 1 gives every drift exactly 0 (a group of one "
        "has no spread, so every advantage is 0); use 2 or more"
    )


def test_the_generated_entry_schema_refuses_what_is_not_a_mapping():
    entry = dial_entry_schema()
    jsonschema.validate({"preset": "grpo", "backend": "trl"}, entry)
    for bad in ("grpo", ["grpo"], {"backend": "x"}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, entry)
    assert entry["properties"]["preset"]["description"] == "The recipe the entry starts from."
    allocation = entry["properties"]["allocation"]["description"]
    assert allocation == "Overrides of train.allocation for this arm."


def test_train_allocation_gets_its_defaults_filled():
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    config["train"]["allocation"] = {}
    assert config_error(config, read_schema(ROOT / "workflow/schemas/config.schema.yaml")) is None
    assert config["train"]["allocation"]["g_max"] == Allocation().g_max


def test_text_that_is_no_number_is_left_to_the_schema():
    assert value_problem({"train": {"lr": "fast"}}, SCHEMA) is None


def test_a_list_items_type_is_checked():
    got = value_problem({"train": {"seeds": [0, 1.0]}}, SCHEMA)
    assert got == "config error at 'train.seeds.1': 1.0 must be an integer; write 1"


def test_the_schema_read_inside_a_test_walks_the_dial_fields():
    schema = read_schema(ROOT / "workflow" / "schemas" / "config.schema.yaml")
    got = value_problem({"dials": {"x": {"eps": "0.1"}}}, schema)
    assert got.startswith("config error at 'dials.x.eps': '0.1' is text, not a number")
    entry = schema["properties"]["dials"]["additionalProperties"]
    assert entry["properties"]["group_size"]["description"].startswith("'uniform': every prompt")


def test_config_error_asks_only_for_a_mapping_per_dial():
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    schema = read_schema(ROOT / "workflow" / "schemas" / "config.schema.yaml")
    config["dials"] = {"x": {"bogus": 1}}  # its keys are read_arm's to check
    assert config_error(config, schema) is None
    config["dials"] = {"x": "grpo"}
    assert config_error(config, schema).startswith("config error at 'dials.x': 'grpo' is not")
