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

from grpo_dial.core.dial import PRESETS
from grpo_dial.dag import ConfigError


def _with_defaults(validator_class: type) -> type:
    properties = validator_class.VALIDATORS["properties"]

    def fill_then_check(validator, props: Mapping, instance, schema) -> Iterator:
        if isinstance(instance, dict):
            for name, subschema in props.items():
                if isinstance(subschema, Mapping) and "default" in subschema:
                    instance.setdefault(name, subschema["default"])
        yield from properties(validator, props, instance, schema)

    return jsonschema.validators.extend(validator_class, {"properties": fill_then_check})


def read_schema(path: str | Path) -> dict:
    """The JSON schema of the config (YAML, safe loader), its dial `preset` enum the live list
    of recipes (core.dial.PRESETS: a registered estimator's recipe is a preset)."""
    schema = yaml.safe_load(Path(path).read_text())
    dial = schema["properties"]["dials"]["additionalProperties"]["properties"]
    dial["preset"]["enum"] = list(PRESETS)
    return schema


def drop_null_dials(config: dict) -> list[str]:
    """Remove the `dials` entries an overlay set to null (`dials: {dapo: null}` switches an arm of
    the config below it off); the names removed."""
    dials = config.get("dials")
    if not isinstance(dials, dict):
        return []
    off = [name for name, entry in dials.items() if entry is None]
    for name in off:
        del dials[name]
    return off


def config_error(config: dict, schema: Mapping) -> str | None:
    """Fill `config`'s defaults in place (after dropping null dials); one line naming the first
    invalid key, or None."""
    drop_null_dials(config)
    validator = _with_defaults(jsonschema.validators.validator_for(schema))(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(config))
    if error is None:
        return None
    where = ".".join(str(part) for part in error.absolute_path) or "<top level>"
    return f"config error at '{where}': {error.message}"


def validate_config(config: dict, schema_path: str | Path) -> None:
    """`config_error` as a ConfigError."""
    if (error := config_error(config, read_schema(schema_path))) is not None:
        raise ConfigError(error)
