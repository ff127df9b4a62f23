"""The config's one validation pass: the same defaults as snakemake's validate, computed by
snakemake itself as the second way, and the first error as one line naming its key."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml
from snakemake.utils import validate

from grpo_dial.dag import ConfigError
from grpo_dial.dag.schema import config_error, read_schema, validate_config

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"


def _merged(*names: str) -> dict:
    """The embedded default with overlays merged on top, key by key (as --configfile does)."""

    def merge(base: dict, over: dict) -> None:
        for key, value in over.items():
            if isinstance(value, dict) and isinstance(base.get(key), dict):
                merge(base[key], value)
            else:
                base[key] = value

    config: dict = {}
    for name in names:
        merge(config, yaml.safe_load((ROOT / "config" / name).read_text()) or {})
    return config


@pytest.mark.parametrize(
    "overlays",
    [("config.yaml",), ("config.yaml", "full.yaml"), ("config.yaml", "smoke.yaml"),
     ("config.yaml", "gpu.yaml"), ("config.yaml", "estimators.yaml")],
)  # fmt: skip
def test_defaults_are_snakemakes(overlays, tmp_path):
    """Snakemake validates against the schema as read (its generated parts written out)."""
    config = _merged(*overlays)
    ours, theirs = copy.deepcopy(config), copy.deepcopy(config)
    assert config_error(ours, read_schema(SCHEMA)) is None
    generated = tmp_path / "config.schema.json"
    generated.write_text(json.dumps(read_schema(SCHEMA)))
    validate(theirs, str(generated))
    assert ours == theirs
    assert ours != config  # defaults were filled


@pytest.mark.parametrize(
    "override, where",
    [
        ({"simulate": {"steps": "many"}}, "simulate.steps"),
        ({"dials": {"x": 2}}, "dials.x"),  # an entry must be a mapping; its fields: the Arm's
        ({"typo_key": 1}, "<top level>"),
    ],
)
def test_the_first_error_is_one_line_naming_its_key(override, where):
    """The schema's own errors; a dial entry's fields are checked once, by the Arm they make
    (tests/dag/test_dag_plan.py, tests/train/test_toy_estimator.py)."""
    config = _merged("config.yaml")
    config.update(override)
    with pytest.raises(ConfigError) as info:
        validate_config(config, SCHEMA)
    message = str(info.value)
    assert message.startswith(f"config error at '{where}': ")
    assert "\n" not in message


def test_an_overlay_switches_an_arm_off_with_null():
    """`dials: {dapo: null}` over the default removes that arm before validation (a null entry
    would otherwise fail the schema), and only that one."""
    config = _merged("config.yaml")
    arms = set(config["dials"])
    config["dials"].update(dapo=None, grpo_adaptive=None)
    assert config_error(config, read_schema(SCHEMA)) is None
    assert set(config["dials"]) == arms - {"dapo", "grpo_adaptive"}
