"""The config's `train` block and TrainConfig state each training setting once: the schema file
writes only the workflow's own keys, every TrainConfig field the config sets is generated from
its one Setting, and a default changed in TrainConfig is the validated config's default."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from pathlib import Path

import yaml

from grpo_dial.backends.trl.settings import TrlLaunch, launch_settings
from grpo_dial.core.dial import BACKEND_SETTING
from grpo_dial.core.settings import setting
from grpo_dial.dag import plan
from grpo_dial.dag.schema import TRAIN_WORKFLOW_MINIMUM, config_error, read_schema
from grpo_dial.train import config as train_config
from grpo_dial.train.config import SET_BY_THE_JOB, TrainConfig, config_settings

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / plan.SCHEMA


def _config(**train: object) -> dict:
    """The embedded default config with its train block replaced by `train`."""
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    return {**config, "train": dict(train)}


def _walk(node: object, path: tuple = ()):
    """Every (path, mapping) below `node`."""
    if isinstance(node, dict):
        yield path, node
        for key, value in node.items():
            yield from _walk(value, (*path, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _walk(value, (*path, i))


def test_the_schema_file_states_no_trainconfig_field():
    """The literal train block names no TrainConfig field, so none of their defaults, ranges or
    help texts is written twice; what it does write is the workflow's own keys."""
    literal = yaml.safe_load(SCHEMA.read_text())["properties"]["train"]
    ours = {f.name for f in fields(TrainConfig)} - {"allocation"}  # allocation: Allocation's
    stated = {key for path, node in _walk(literal) for key in node if path[-1:] == ("properties",)}
    assert not stated & ours, sorted(stated & ours)
    assert set(literal["properties"]) == set(plan.TRAIN_WORKFLOW_KEYS)
    assert "properties" not in literal["properties"]["trl"]  # TrlLaunch's
    assert "default" not in literal["properties"]["backend"]  # core.dial.BACKEND_SETTING's


def test_the_generated_launch_block_is_trllaunchs():
    """train.trl's properties and train.backend's default come from their one definition, and
    the launch helpers read a partial train.trl with the same defaults."""
    train = read_schema(SCHEMA)["properties"]["train"]["properties"]
    launch = {name: spec["default"] for name, spec in train["trl"]["properties"].items()}
    assert launch == asdict(TrlLaunch()) == launch_settings({})
    assert train["backend"]["default"] == BACKEND_SETTING.default
    assert train["backend"]["enum"] == list(BACKEND_SETTING.choices)
    config = _config()
    assert config_error(config, read_schema(SCHEMA)) is None
    assert config["train"]["trl"] == launch


def test_the_generated_train_block_is_trainconfigs():
    """Each generated property's default, range and description are its Setting's, the
    validated config's defaults are TrainConfig's, and a train job's TrainConfig built from a
    config that sets nothing equals TrainConfig() in every field the config sets."""
    train = read_schema(SCHEMA)["properties"]["train"]["properties"]
    settings = config_settings()
    assert set(settings) == set(train) - set(plan.TRAIN_WORKFLOW_KEYS)
    assert not set(settings) & set(SET_BY_THE_JOB)
    defaults = TrainConfig()
    for name, spec in settings.items():
        assert train[name]["default"] == getattr(defaults, name), name
        expected = spec.json_schema(with_default=True)
        if name in TRAIN_WORKFLOW_MINIMUM:  # the workflow's narrower range
            assert spec.low < TRAIN_WORKFLOW_MINIMUM[name]
            expected["minimum"] = TRAIN_WORKFLOW_MINIMUM[name]
        assert train[name] == expected, name
    config = _config()
    assert config_error(config, read_schema(SCHEMA)) is None
    job = TrainConfig(**plan.section(config["train"], plan.TRAIN_WORKFLOW_KEYS))
    assert all(getattr(job, name) == getattr(defaults, name) for name in settings)


def test_a_default_changed_in_trainconfig_is_the_configs(monkeypatch):
    """Changing a field's default where TrainConfig defines it changes the default the
    validated config carries: nothing else states it."""

    @dataclass(frozen=True)
    class Cooler(TrainConfig):
        temperature: float = setting(0.7, "Sampling temperature.", kind=float, low=0.0)

    monkeypatch.setattr(train_config, "TrainConfig", Cooler)
    config = _config()
    assert config_error(config, read_schema(SCHEMA)) is None
    assert config["train"]["temperature"] == 0.7
    config = _config(temperature=1.3)
    assert config_error(config, read_schema(SCHEMA)) is None
    assert config["train"]["temperature"] == 1.3
