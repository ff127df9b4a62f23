"""Config files read and layered as `snakemake --configfile a.yaml b.yaml` layers them.

Each file is read strictly (grpo_dial.dag.config_checks.read_config_file: size, encoding,
aliases, duplicate keys and tags, refused in one line), then merged over the ones before it:
a mapping given in both is merged key by key, anything else in the later file replaces the
earlier value (a list whole, a null included).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from grpo_dial.dag.config_checks import read_config_file


def merge_config(base: Mapping, over: Mapping) -> dict:
    """A new dict: `over` merged over `base`, nested mappings key by key (module docstring)."""
    out = dict(base)
    for key, value in over.items():
        both = isinstance(value, Mapping) and isinstance(out.get(key), Mapping)
        out[key] = merge_config(out[key], value) if both else value
    return out


def layered_config(paths: Iterable[str | Path]) -> dict:
    """The files merged in order; ValueError with one line for a missing file, a file whose
    top level is not a mapping, or any problem read_config_file names."""
    config: dict = {}
    for path in paths:
        if not Path(path).is_file():
            raise ValueError(f"config file not found: {path}")
        problem, data = read_config_file(path)
        if problem is not None:
            raise ValueError(problem)
        if data is None:
            continue
        if not isinstance(data, Mapping):
            raise ValueError(
                f"config error in {path}: the top level must be a mapping of keys, "
                f"got {type(data).__name__}"
            )
        config = merge_config(config, data)
    return config
