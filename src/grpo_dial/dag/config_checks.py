"""Config problems the schema cannot see, each as one line naming the key or file, found before
any job runs (grpo_dial.dag.plan.open_plan calls `config_problems` once, before the schema's
own check, with the one schema it read).

- a key given twice in one mapping of a config file (PyYAML keeps the last silently): the files
  are re-read with a safe loader that refuses duplicates; so is a tag such as !!python/object,
  named with its file (the safe loader's own message blames tabs);
- a number YAML 1.1 reads as text: `lr: 1e-4` has no dot, so PyYAML returns the string
  '1e-4'; the line says to write 1.0e-4 (a dot and a signed exponent);
- a float where the schema wants an integer (`steps: 5.0`: JSON Schema counts 5.0 as an
  integer, the job does not);
- a seed outside 0..2^32 - 1 (seeds name the run folders, and numpy's legacy generators take
  32 bits);
- a device torch does not know (`model.device: gpu`);
- `length_bias.group_size: 1` (a group of one has no spread: every drift is exactly 0);
- a number given as text where the schema wants one: Snakemake's `--config 'train={steps: 5}'`
  passes a nested mapping's values as text ('5'); nested keys belong in an overlay config file
  (`--config train.steps=5` itself stops in Snakemake's parser, before any of this runs);
- a top-level key with a dot (`train.steps: 5` in a file): keys are nested, not dotted;
- a number that is not finite (`lr: .nan`, `temperature: .inf`): the schema's ranges compare
  false with NaN, so it would reach a job;
- a file with more than MAX_ALIASES YAML aliases (an alias bomb: a few hundred bytes that expand
  exponentially when the config is walked), refused before anything walks it; a file over
  MAX_FILE_BYTES, refused before it is parsed; a file that is not UTF-8 text. YAML merge keys
  (`<<: *base`) are read as yaml.safe_load reads them: the keys a mapping gives override the
  merged ones;
- a name of `dials`, `passrate_tables`, `runs` or `public_data` that is not text (`1:`, `true:`)
  or holds a control character (a trailing newline included): names become folders and rows;
- `dials: {name: null}` (null switches an arm off) where no config file, nor the schema's
  default, defines an arm `name` to switch off (a typo would otherwise pass silently).

A value echoed in a line is cut to SHOWN_CHARS characters (`shown`), with its full length.

Standard library only at import (the DAG build imports no torch); PyYAML, which Snakemake
itself reads configs with, is imported inside the file check.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from grpo_dial.dag import SHOWN_CHARS, cut

SEED_MAX = 2**32 - 1
MAX_ALIASES = 100
MAX_FILE_BYTES = 2**20  # 1 MiB: a config file is a few kB; a larger one is not parsed
NAMED_SECTIONS = ("dials", "passrate_tables", "runs", "public_data")  # name -> entry
_MERGE_TAG = "tag:yaml.org,2002:merge"
_SCIENTIFIC = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)[eE][+-]?\d+$")  # YAML 1.1 floats need a dot
_DEVICE = re.compile(r"^(cpu|mps|cuda(:\d+)?|xpu(:\d+)?)$")


def shown(value: object, limit: int = SHOWN_CHARS) -> str:
    """repr(value), cut to `limit` characters with an ellipsis and the full length when longer."""
    text = repr(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text)} characters)"


def _where(path: tuple) -> str:
    return cut(".".join(str(p) for p in path)) or "<top level>"


def _walk(node: object, path: tuple = ()) -> Iterable[tuple[tuple, object]]:
    yield path, node
    if isinstance(node, Mapping):
        for key, value in node.items():
            yield from _walk(value, (*path, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _walk(value, (*path, i))


def file_problem(path: str | Path) -> str | None:
    """One line for a config file with a duplicate key or an unsafe tag; None when it reads."""
    return read_config_file(path)[0]


def read_config_file(path: str | Path) -> tuple[str | None, object]:
    """(one line for the file's first problem, None) or (None, its contents)."""
    import yaml

    class StrictLoader(yaml.SafeLoader):
        pass

    def mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict:
        seen: dict = {}
        for key_node, _ in node.value:
            if key_node.tag == _MERGE_TAG:  # `<<: *base`: construct_mapping merges it
                continue
            key = loader.construct_object(key_node, deep=True)
            if key in seen:
                line = key_node.start_mark.line + 1
                raise ValueError(
                    f"config error in {path}: key {key!r} is given twice in one mapping "
                    f"(lines {seen[key]} and {line}); YAML would keep the last silently"
                )
            seen[key] = key_node.start_mark.line + 1
        return loader.construct_mapping(node, deep=True)

    StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    try:
        size = Path(path).stat().st_size
        if size > MAX_FILE_BYTES:
            return (
                f"config error in {path}: the file is {size} bytes; a config file may be at most "
                f"{MAX_FILE_BYTES} bytes (keep data in files the config names)"
            ), None
        text = Path(path).read_text(encoding="utf-8")  # as Snakemake reads it
    except OSError as err:
        return f"config error: cannot read config file {path}: {err.strerror}", None
    except UnicodeDecodeError as err:
        return (
            f"config error in {path}: not UTF-8 text (byte {err.object[err.start]:#04x} at "
            f"offset {err.start}); save the file as UTF-8"
        ), None
    try:
        events = yaml.parse(text, Loader=yaml.SafeLoader)
        aliases = sum(isinstance(event, yaml.AliasEvent) for event in events)
        if aliases > MAX_ALIASES:
            return (
                f"config error in {path}: {aliases} YAML aliases (*name); a config file may "
                f"use at most {MAX_ALIASES} (more can expand exponentially: an alias bomb)"
            ), None
        data = yaml.load(text, Loader=StrictLoader)  # noqa: S506 (a SafeLoader subclass)
    except ValueError as err:
        return str(err), None
    except yaml.constructor.ConstructorError as err:
        tag = getattr(err, "problem", "") or str(err)
        found = re.search(r"tag '([^']+)'", tag)
        mark = err.problem_mark
        at = f" (line {mark.line + 1})" if mark is not None else ""
        if found is None:  # not a tag: a merge key (<<) given something other than mappings
            return f"config error in {path}{at}: {cut(tag)}", None
        return (
            f"config error in {path}{at}: the tag {found.group(1)!r} is not "
            f"allowed; config files are read with a safe loader (plain values only)"
        ), None
    except yaml.YAMLError as err:
        first = str(err).strip().splitlines()
        text = " ".join(x.strip() for x in first)
        return f"config error in {path}: not valid YAML: {cut(text)}", None
    return None, data


def _typed_keys(schema: Mapping, want: str, path: tuple = ()) -> Iterable[tuple]:
    """Paths ('*' for any key or item) whose schema type allows `want` ('integer': integer and
    not number; 'number': integer or number) and no string."""
    kind = schema.get("type")
    kinds = set(kind) if isinstance(kind, list) else {kind}
    allowed = {"integer"} if want == "integer" else {"integer", "number"}
    if kinds & allowed and "string" not in kinds and not (want == "integer" and "number" in kinds):
        yield path
    for key, sub in (schema.get("properties") or {}).items():
        yield from _typed_keys(sub, want, (*path, key))
    for name in ("additionalProperties", "items"):
        sub = schema.get(name)
        if isinstance(sub, Mapping):
            yield from _typed_keys(sub, want, (*path, "*"))


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return text.strip().lower() not in ("nan", "inf", "-inf", "+inf", "infinity")


def _matches(pattern: tuple, path: tuple) -> bool:
    return len(pattern) == len(path) and all(
        p in ("*", q) for p, q in zip(pattern, path, strict=True)
    )


def name_problem(config: Mapping) -> str | None:
    """One line for the first name of NAMED_SECTIONS that is not text or holds a control
    character; None when every name is text without one."""
    for section in NAMED_SECTIONS:
        entries = config.get(section) if isinstance(config, Mapping) else None
        if not isinstance(entries, Mapping):
            continue
        for name in entries:
            if not isinstance(name, str):
                return (
                    f"config error at '{section}': the name {shown(name)} is not text (YAML "
                    f"reads it as {type(name).__name__}); quote it in the file"
                )
            if any(ord(c) < 32 or ord(c) == 127 for c in name):
                return (
                    f"config error at '{section}': the name {shown(name)} holds a control "
                    f"character; names are letters, digits, '_' or '-' (they name folders)"
                )
    return None


def null_dial_problem(config: Mapping, files: list, schema: Mapping) -> str | None:
    """One line for the first `dials: {name: null}` that switches off no arm: `name` is no
    mapping entry of `dials` in any of the config files `files` (their contents) nor of the
    schema's default dials. None when every null names such an arm, or no file was read."""
    dials = config.get("dials") if isinstance(config, Mapping) else None
    if not files or not isinstance(dials, Mapping):
        return None
    defined = set((schema.get("properties", {}).get("dials") or {}).get("default") or {})
    for data in files:
        given = data.get("dials") if isinstance(data, Mapping) else None
        if isinstance(given, Mapping):
            defined |= {name for name, entry in given.items() if entry is not None}
    for name, entry in dials.items():
        if entry is None and name not in defined:
            return (
                f"config error at 'dials.{cut(str(name))}': null switches an arm off, but no "
                f"config file defines an arm {shown(name)}; arms: {cut(str(sorted(defined)))}"
            )
    return None


def value_problem(config: Mapping, schema: Mapping) -> str | None:
    """One line for the first value problem of the module docstring; None when there is none."""
    for key in config:
        if isinstance(key, str) and "." in key:
            outer, inner = (cut(part) for part in key.split(".", 1))
            return (
                f"config error at '{cut(key)}': keys are nested, not dotted; write "
                f"'{outer}: {{{inner}: ...}}' in an overlay config file (docs/configuration.md)"
            )
    if (problem := name_problem(config)) is not None:
        return problem
    integers, numbers = list(_typed_keys(schema, "integer")), list(_typed_keys(schema, "number"))
    for path, value in _walk(config):
        where = _where(path)
        if isinstance(value, str) and _SCIENTIFIC.match(value.strip()):
            mantissa, _, exponent = value.strip().lower().partition("e")
            mantissa = mantissa if "." in mantissa else f"{mantissa}.0"
            exponent = exponent if exponent[0] in "+-" else f"+{exponent}"
            return (
                f"config error at '{where}': {shown(value)} is text to YAML 1.1 (a float needs a "
                f"dot and a signed exponent); write {cut(mantissa + 'e' + exponent)}"
            )
        if isinstance(value, str) and _is_number(value) and any(_matches(p, path) for p in numbers):
            return (
                f"config error at '{where}': {shown(value)} is text, not a number (Snakemake's "
                f"--config passes a nested mapping's values as text); set nested keys in an "
                f"overlay config file (docs/configuration.md)"
            )
        if isinstance(value, float) and not math.isfinite(value):
            return f"config error at '{where}': {value!r} is not a finite number"
        if isinstance(value, float) and any(_matches(p, path) for p in integers):
            hint = f"; write {int(value)}" if value.is_integer() else ""
            return f"config error at '{where}': {value!r} must be an integer{hint}"
        last = path[-1] if path else None
        seeds = last in ("seed", "seeds") or (len(path) > 1 and path[-2] == "seeds")
        if seeds and isinstance(value, int) and not isinstance(value, bool):
            if not 0 <= value <= SEED_MAX:
                return (
                    f"config error at '{where}': seed {value} is out of range; seeds are "
                    f"integers 0..{SEED_MAX} (they name the run folders seed0, seed1, ...)"
                )
    device = (config.get("model") or {}).get("device") if isinstance(config, Mapping) else None
    if isinstance(device, str) and not _DEVICE.match(device):
        return (
            f"config error at 'model.device': {shown(device)} is not a torch device; use cpu, "
            f"cuda (one free GPU per job) or cuda:N"
        )
    bias = config.get("length_bias") if isinstance(config, Mapping) else None
    if isinstance(bias, Mapping) and bias.get("group_size") == 1:
        return (
            "config error at 'length_bias.group_size': 1 gives every drift exactly 0 (a group "
            "of one has no spread, so every advantage is 0); use 2 or more"
        )
    return None


def config_problems(
    config: Mapping, configfiles: Iterable[str | Path], schema: Mapping
) -> str | None:
    """The first problem of the config files, then of the merged config, as one line."""
    files = []
    for path in configfiles:
        problem, data = read_config_file(path)
        if problem is not None:
            return problem
        files.append(data)
    if (problem := value_problem(config, schema)) is not None:
        return problem
    return null_dial_problem(config, files, schema)
