"""One validation pass over the config: the first error as one line naming its key, and every
default of the schema filled in on the way (as snakemake.utils.validate fills them).

The defaults are set by the `properties` keyword, before the properties themselves are checked,
so a nested section the config omits is filled key by key like one it gives.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

import jsonschema
import yaml

from grpo_dial.backends.trl.settings import TrlLaunch
from grpo_dial.core.allocation import ALLOCATION_SETTINGS, SETTING_KEYS
from grpo_dial.core.dial import BACKEND_SETTING, PRESETS, dial_settings
from grpo_dial.core.settings import dataclass_settings
from grpo_dial.dag import ConfigError
from grpo_dial.dag.config_checks import cut, shown
from grpo_dial.train.config import config_settings

# Where the workflow admits less than TrainConfig: an interval of 0 (only the first and last
# evaluation, only the final checkpoint, no identity probe) is the library's, while the trl
# backend's evaluation and save schedules divide by the interval and the training figures read
# the identity records.
TRAIN_WORKFLOW_MINIMUM = {"eval_every": 1, "checkpoint_every": 1, "identity_every": 1}


def _with_defaults(validator_class: type) -> type:
    properties = validator_class.VALIDATORS["properties"]

    def fill_then_check(validator, props: Mapping, instance, schema) -> Iterator:
        if isinstance(instance, dict):
            for name, subschema in props.items():
                if isinstance(subschema, Mapping) and "default" in subschema:
                    instance.setdefault(name, subschema["default"])
        yield from properties(validator, props, instance, schema)

    return jsonschema.validators.extend(validator_class, {"properties": fill_then_check})


def allocation_schema(*, with_defaults: bool) -> dict:
    """The schema of an allocation mapping (train.allocation with its defaults; an arm's own
    `allocation` without), from core.allocation.Allocation's field settings."""
    return {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            name: ALLOCATION_SETTINGS[name].json_schema(with_default=with_defaults)
            for name in SETTING_KEYS
        },
    }


def dial_entry_schema() -> dict:
    """The schema of one `dials.<name>` entry, generated from the one definition of each field:
    the recipes (core.dial.PRESETS), every Dial field (the core's and each registered
    estimator's, core.dial.dial_settings), and the arm's backend, group_size and allocation."""
    scheme = ALLOCATION_SETTINGS["scheme"]
    return {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "preset": {"enum": list(PRESETS), "description": "The recipe the entry starts from."},
            **{name: spec.json_schema() for name, spec in dial_settings().items()},
            "backend": BACKEND_SETTING.json_schema(),
            "group_size": {"enum": list(scheme.choices), "description": scheme.help},
            "allocation": {
                **allocation_schema(with_defaults=False),
                "description": "Overrides of train.allocation for this arm.",
            },
        },
    }


def train_schema() -> dict:
    """The schema's `train` properties that are TrainConfig fields, each generated from the
    field's one Setting (grpo_dial.train.config.config_settings) with its default; a field of
    TRAIN_WORKFLOW_MINIMUM gets that minimum instead of the library's."""
    out = {}
    for name, spec in config_settings().items():
        out[name] = spec.json_schema(with_default=True)
        if name in TRAIN_WORKFLOW_MINIMUM:
            out[name]["minimum"] = TRAIN_WORKFLOW_MINIMUM[name]
    return out


def read_schema(path: str | Path) -> dict:
    """The JSON schema of the config (YAML, safe loader: libyaml's where installed, since every
    snakemake call reads it) with its generated parts: a dial entry's properties,
    train.allocation's, and every train property that is a TrainConfig field (`dial_entry_schema`,
    `allocation_schema`, `train_schema`), train.trl's (backends.trl.settings.TrlLaunch) and
    train.backend's choices and default (core.dial.BACKEND_SETTING, the file keeps its text)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's, where PyYAML has it
    schema = yaml.load(Path(path).read_text(), Loader=loader)  # noqa: S506 (a safe loader)
    schema["properties"]["dials"]["additionalProperties"] = dial_entry_schema()
    train = schema["properties"]["train"]
    train["properties"] = {**train_schema(), **train["properties"]}
    train["properties"]["allocation"].update(allocation_schema(with_defaults=True))
    backend = BACKEND_SETTING.json_schema(with_default=True)
    train["properties"]["backend"] = {**backend, **train["properties"]["backend"]}
    train["properties"]["trl"]["properties"] = {
        name: spec.json_schema(with_default=True)
        for name, spec in dataclass_settings(TrlLaunch).items()
    }
    return schema


def drop_null_dials(config: dict) -> list[str]:
    """Remove the `dials` entries an overlay set to null (`dials: {dapo: null}` switches an arm of
    the config below it off); the names removed. `dials: null` switches every arm off (an
    overlay's `dials: {}` cannot: Snakemake merges it into the arms below, keeping them)."""
    if "dials" in config and config["dials"] is None:
        config["dials"] = {}
    dials = config.get("dials")
    if not isinstance(dials, dict):
        return []
    off = [name for name, entry in dials.items() if entry is None]
    for name in off:
        del dials[name]
    return off


def config_error(config: dict, schema: Mapping) -> str | None:
    """Fill `config`'s defaults in place (after dropping null dials); one line naming the first
    invalid key (a value it echoes cut as config_checks.shown cuts it), or None. A `dials`
    entry is only required to be a mapping here: its keys and values are checked once, when the
    DAG build reads it into an Arm (dag.arms.resolve_arms), by the same Settings the generated
    entry schema is drawn from."""
    drop_null_dials(config)
    dials = dict(schema["properties"]["dials"], additionalProperties={"type": "object"})
    schema = {**schema, "properties": {**schema["properties"], "dials": dials}}
    validator = _with_defaults(jsonschema.validators.validator_for(schema))(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(config))
    if error is None:
        return None
    where = ".".join(str(part) for part in error.absolute_path) or "<top level>"
    message = error.message.replace(repr(error.instance), shown(error.instance))
    return f"config error at '{cut(where)}': {message}"


def validate_config(config: dict, schema_path: str | Path) -> None:
    """`config_error` as a ConfigError."""
    if (error := config_error(config, read_schema(schema_path))) is not None:
        raise ConfigError(error)
