"""The engine options a run's saved files state, each read by its path in the config.

Files. YAML (.yaml, .yml) and JSON files are parsed (safe loaders) and flattened to dotted
paths (`actor_rollout_ref.actor.loss_agg_mode`); a wandb config's `{key: {desc, value}}` reads
as `key`; a list of Hydra overrides (`.hydra/overrides.yaml`) as the paths it sets. Any other
text file (a log, a launch script, a printed config) is scanned for the forms engines write:
indented YAML `key: value` (the indentation gives the path), JSON or a printed dict
(`{'algorithm': {'adv_estimator': 'grpo'}}`: the braces give the path), `path=value` (Hydra
overrides, TRL's GRPOConfig repr `epsilon_high=None,`, argparse's Namespace) and command lines
`--path value` (a bare `--flag` reads as true). A value is None when the file says null /
None / ~ (the engine then resolves it); an unresolved interpolation `${...}` is not a value.

Options. Each option (OPTIONS) is known by the paths it has in its engine's config: TRL's are
top level (GRPOConfig is flat), so verl's `algorithm.rollout_correction.loss_type` is not TRL's
`loss_type`; verl's by their full path (`actor_rollout_ref.actor.policy_loss.loss_mode`, not the
distillation block's `distillation.distillation_loss.loss_mode`); OpenRLHF's by their names before
(`advantage_estimator`) and from 0.10.2 on (`algo.advantage.estimator`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import yaml

# option -> (engine, accepted paths). A path matches when it equals one, or (verl) ends with
# "." + one (a config printed under a prefix).
OPTIONS: dict[str, tuple[str, tuple[str, ...]]] = {
    **{k: ("trl", (k,)) for k in (
        "scale_rewards", "loss_type", "importance_sampling_level", "epsilon", "epsilon_high",
        "max_completion_length", "per_device_train_batch_size", "num_generations",
        "mask_truncated_completions", "multi_objective_aggregation", "reward_weights",
    )},
    "adv_estimator": ("verl", ("algorithm.adv_estimator",)),
    "norm_adv_by_std_in_grpo": ("verl", ("algorithm.norm_adv_by_std_in_grpo",)),
    "loss_agg_mode": ("verl", ("actor_rollout_ref.actor.loss_agg_mode",)),
    "loss_mode": ("verl", ("actor_rollout_ref.actor.policy_loss.loss_mode",)),
    "clip_ratio": ("verl", ("actor_rollout_ref.actor.clip_ratio",)),
    "clip_ratio_low": ("verl", ("actor_rollout_ref.actor.clip_ratio_low",)),
    "clip_ratio_high": ("verl", ("actor_rollout_ref.actor.clip_ratio_high",)),
    "loss_scale_factor": ("verl", ("actor_rollout_ref.actor.loss_scale_factor",)),
    "filter_groups.enable": ("verl", ("algorithm.filter_groups.enable",)),
    "filter_groups.max_num_gen_batches": ("verl", ("algorithm.filter_groups.max_num_gen_batches",)),
    "gdpo_reward_keys": ("verl", ("algorithm.gdpo_reward_keys",)),
    "rollout.n": ("verl", ("actor_rollout_ref.rollout.n",)),
    "advantage_estimator": ("openrlhf", ("advantage_estimator", "algo.advantage.estimator")),
    "eps_clip": ("openrlhf", ("eps_clip", "actor.eps_clip")),
    "eps_clip_low_high": ("openrlhf", ("eps_clip_low_high", "actor.eps_clip_low_high")),
    "dynamic_filtering": ("openrlhf", ("dynamic_filtering", "algo.dynamic_filtering_enable")),
    "dynamic_filtering_range": (
        "openrlhf", ("dynamic_filtering_reward_range", "algo.dynamic_filtering_range")
    ),
    "actor.loss_agg_mode": ("openrlhf", ("actor.loss_agg_mode",)),  # from 0.11.2
    "n_samples_per_prompt": (
        "openrlhf", ("n_samples_per_prompt", "rollout.n_samples_per_prompt")
    ),
}  # fmt: skip
ENGINES = ("trl", "verl", "openrlhf")
STRUCTURED = {".yaml", ".yml", ".json"}
SUFFIXES = {*STRUCTURED, ".log", ".txt", ".out", ".cfg", ".sh", ".md", ".args", ".jsonl"}
MAX_BYTES = 4 * 2**20
NULLS = {"None", "null", "Null", "NULL", "~", ""}  # "none" is a value (TRL)
_NAME = r"[A-Za-z_][\w\-]*(?:\.[A-Za-z_][\w\-]*)*"
_SCALAR = r"'[^'\n]*'|\"[^\"\n]*\"|\[[^\]\n]*\]|\([^)\n]*\)|[^\s,;)}\]]+"
_ASSIGN = re.compile(rf"(?<![\w.\-/$:])[+~]{{0,2}}({_NAME})\s?=\s?({_SCALAR})")
_PAIR = rf"(?:{_SCALAR})(?:\s+(?!--)[\d.eE+\-]+)?"  # nargs=2 numbers: `--range 0 1`
_FLAG = re.compile(rf"(?<![\w\-])--({_NAME})(?:[ =]+(?!--)({_PAIR}))?")
_YAML_LINE = re.compile(rf"^(\s*)(?:-\s+)?({_NAME}):(?:\s+(.*?))?\s*$")
_DICT_TOKEN = re.compile(
    rf"(\{{)|(\}})|['\"]({_NAME})['\"]\s*:\s*(?!\{{)({_SCALAR})|['\"]({_NAME})['\"]\s*:\s*(?=\{{)"
)


def files(paths: Iterable[str | Path]) -> list[Path]:
    """The readable files of `paths`: a folder's up to three levels down (and .hydra/), by
    SUFFIXES and at most MAX_BYTES; a named file as is. A path that does not exist raises."""
    out = []
    for path in map(Path, paths):
        if path.is_dir():
            found = [p for depth in ("*", "*/*", "*/*/*", ".hydra/*", "*/.hydra/*")
                     for p in sorted(path.glob(depth))]  # fmt: skip
            out += [p for p in dict.fromkeys(found) if p.is_file() and p.suffix in SUFFIXES]
        elif path.is_file():
            out.append(path)
        else:
            raise ValueError(f"engine config {path} does not exist")
    return [p for p in out if p.stat().st_size <= MAX_BYTES]


def scalar(value: object) -> object:
    """A value as the engines mean it: null / None / ~ -> None (not 'none', a value of TRL's
    scale_rewards); a quoted string unquoted; 'true' / 'false' (any case) -> bool; a bracketed
    list -> list; other text stays text."""
    if isinstance(value, str):
        text = value.strip().rstrip(",").strip()
        if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
            text = text[1:-1]
        if text in NULLS:
            return None
        if text.lower() in ("true", "false"):
            return text.lower() == "true"
        if text[:1] in "[(" and text[-1:] in "])":
            return [scalar(v) for v in re.split(r"\s*,\s*", text[1:-1].strip()) if v]
        return text
    return value


def _flatten(node: object, prefix: str = "") -> Iterator[tuple[str, object]]:
    if isinstance(node, dict):
        if prefix and set(node) >= {"value"} and set(node) <= {"desc", "value"}:  # wandb
            yield from _flatten(node["value"], prefix)
            return
        for key, value in node.items():
            yield from _flatten(value, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(node, list) and node and all(isinstance(v, str) for v in node):
        overrides = [m for v in node if (m := _ASSIGN.fullmatch(v.strip()))]
        if overrides:  # Hydra's overrides.yaml, hydra.yaml's overrides.task
            yield from ((m.group(1), scalar(m.group(2))) for m in overrides)
        if prefix:
            yield prefix, node
    else:
        if prefix:
            yield prefix, node


def _yaml_lines(text: str) -> Iterator[tuple[str, object]]:
    stack: list[tuple[int, str]] = []
    for line in text.splitlines():
        m = _YAML_LINE.match(line)
        if not m:
            continue
        indent, key, value = len(m.group(1)), m.group(2), m.group(3)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = ".".join([*(k for _, k in stack), key])
        if value is None or value == "":
            stack.append((indent, key))
        elif not value.startswith(("{", "|", ">", "&", "*")):
            yield path, scalar(value.split(" #")[0])


def _dicts(text: str) -> Iterator[tuple[str, object]]:
    stack: list[str | None] = []
    pending: str | None = None
    for m in _DICT_TOKEN.finditer(text):
        if m.group(1):
            stack.append(pending)
            pending = None
        elif m.group(2):
            if stack:
                stack.pop()
        elif m.group(5):
            pending = m.group(5)
        elif stack:
            yield ".".join([*(k for k in stack if k), m.group(3)]), scalar(m.group(4))


def _text(text: str) -> Iterator[tuple[str, object]]:
    text = re.sub(r"\\\r?\n", " ", text)  # a shell line continuation
    yield from _yaml_lines(text)
    yield from _dicts(text)
    for m in _ASSIGN.finditer(text):
        yield m.group(1), scalar(m.group(2))
    for m in _FLAG.finditer(text):
        value = m.group(2)
        if value is not None and " " in value.strip() and value[0] not in "'\"[(":
            value = "[" + ", ".join(value.split()) + "]"  # nargs=2: `--range 0 1`
        yield m.group(1).replace("-", "_"), True if value is None else scalar(value)


def read_paths(path: Path) -> list[tuple[str, object]]:
    """(path, value) of every setting one file states (module docstring)."""
    raw = path.read_bytes().decode("utf-8", errors="replace")
    if path.suffix in STRUCTURED:
        try:
            node = json.loads(raw) if path.suffix == ".json" else yaml.safe_load(raw)
        except (ValueError, yaml.YAMLError, RecursionError):
            node = None
        if isinstance(node, dict | list):
            return list(_flatten(node))
    return list(_text(raw))


def option_of(path: str) -> str | None:
    """The OPTIONS key a config path sets, or None."""
    path = path.lstrip("+~")
    for option, (engine, accepted) in OPTIONS.items():
        for a in accepted:
            if path == a or (engine == "verl" and path.endswith("." + a)):
                return option
    return None


@dataclass(frozen=True)
class RunConfig:
    """What a run's files say: `options` (read_engine_options' frame), every config path they
    set (a verl release's marker paths among them) and the engine releases they state."""

    options: pd.DataFrame
    paths: frozenset[str]
    stated: Mapping[str, tuple[str, str]]  # engine -> (release, source)


def read_run(paths: Iterable[str | Path]) -> RunConfig:
    """Every file of `paths` read once (module docstring)."""
    from grpo_dial.external.engine_releases import stated_release

    rows, seen, texts = [], set(), []
    for path in files(paths):
        texts.append((str(path), path.read_bytes().decode("utf-8", errors="replace")))
        for where, value in read_paths(path):
            seen.add(where.lstrip("+~"))
            option = option_of(where)
            if option is None or (isinstance(value, str) and value.startswith("${")):
                continue
            rows.append({"option": option, "engine": OPTIONS[option][0], "path": where,
                         "value": _text_of(value), "source": str(path)})  # fmt: skip
    frame = pd.DataFrame(rows, columns=["option", "engine", "path", "value", "source"])
    stated = {e: r for e in ENGINES if (r := stated_release(e, texts)) is not None}
    return RunConfig(frame.drop_duplicates(["option", "value"]).reset_index(drop=True),
                     frozenset(seen), stated)  # fmt: skip


def read_engine_options(paths: Iterable[str | Path]) -> pd.DataFrame:
    """(option, engine, path, value, source): every OPTIONS entry the files state, one row per
    distinct (option, value), the first file that states it as source; empty when none. Values
    are `scalar`s rendered as text ('None' for null, 'true' / 'false', numbers as floats)."""
    return read_run(paths).options


def _text_of(value: object) -> str:
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_text_of(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "None"
    try:
        number = float(str(value))
    except (ValueError, OverflowError):
        return str(value)
    if number.is_integer() and abs(number) < 2**53:
        return str(int(number))
    return repr(number)
