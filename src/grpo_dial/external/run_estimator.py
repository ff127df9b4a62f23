"""Which estimator a logged run used, read from its config or log: each engine option the files
name (TRL's GRPOConfig, verl's Hydra config, OpenRLHF's arguments) mapped to the dial setting
that reproduces it (docs/estimators.md, "Your engine's config as a dial"), and the preset
nearest to the result.

Reading. Every text file given, or found in the run's folder (up to three levels down; .yaml,
.yml, .json, .log, .txt, .out, .cfg, .sh, .md, .args, at most 4 MB each), is scanned for the
option names below in any of the forms the engines write them: YAML `key: value`, JSON
`"key": "value"`, Python reprs `key='value'`, Hydra overrides `algorithm.adv_estimator=grpo` and
command lines `--key value`. A key read with two different values is a conflict: it is
reported with both sources and no estimator is named. A pickle (TRL's training_args.bin) is
never read.

Mapping. The engine is the one whose keys were found (`format` breaks a tie). Options the files
do not state take the engine's default (TRL 1.16: scale_rewards 'group', loss_type 'dapo',
importance_sampling_level 'token', epsilon 0.2; verl 0.9.1: loss_agg_mode 'token-mean',
norm_adv_by_std_in_grpo true, policy loss 'vanilla'), and the table says which were defaults.
An option value with no dial setting (TRL's cispo / sapo / vespo losses, verl's gae / remax
estimators, a policy loss other than vanilla / gspo) is named, and no dial is built.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import pandas as pd

OPTIONS = {  # option key -> engine
    **dict.fromkeys(
        (
            "scale_rewards",
            "loss_type",
            "importance_sampling_level",
            "epsilon",
            "epsilon_high",
            "max_completion_length",
            "per_device_train_batch_size",
        ),
        "trl",
    ),  # fmt: skip
    **dict.fromkeys(
        (
            "adv_estimator",
            "norm_adv_by_std_in_grpo",
            "loss_agg_mode",
            "loss_mode",
            "clip_ratio",
            "clip_ratio_low",
            "clip_ratio_high",
            "loss_scale_factor",
        ),
        "verl",
    ),  # fmt: skip
    **dict.fromkeys(("advantage_estimator", "eps_clip"), "openrlhf"),
}
DEFAULTS = {
    "trl": {
        "scale_rewards": "group",
        "loss_type": "dapo",
        "importance_sampling_level": "token",
        "epsilon": "0.2",
    },  # fmt: skip
    "verl": {
        "loss_agg_mode": "token-mean",
        "norm_adv_by_std_in_grpo": "true",
        "loss_mode": "vanilla",
    },  # fmt: skip
    "openrlhf": {},
}
SUFFIXES = {".yaml", ".yml", ".json", ".log", ".txt", ".out", ".cfg", ".sh", ".md", ".args"}
MAX_BYTES = 4 * 2**20
COLUMNS = ("option", "value", "source", "dial")
ESTIMATOR_FIELDS = (
    "std_power", "baseline", "std_scope", "gpg_scale", "whiten", "ratio_level", "length_norm",
    "silent",
)  # fmt: skip
_VALUE = r"[\"']?([A-Za-z0-9_.+\-]+)"
_PATTERNS = {
    key: (
        re.compile(rf"(?<![\w-]){key}[\"']?\s*[:=]\s*{_VALUE}"),
        re.compile(rf"--{key}\s+{_VALUE}"),
    )
    for key in OPTIONS
}


def _files(paths: Iterable[str | Path]) -> list[Path]:
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


def read_engine_options(paths: Iterable[str | Path]) -> pd.DataFrame:
    """(option, value, source) of every engine option the files name, one row per distinct
    value and file (module docstring); empty when none is named."""
    rows = []
    for path in _files(paths):
        text = path.read_text(errors="replace")
        for key, patterns in _PATTERNS.items():
            values = {m.group(1) for pattern in patterns for m in pattern.finditer(text)}
            rows += [{"option": key, "value": v, "source": str(path)} for v in sorted(values)]
    frame = pd.DataFrame(rows, columns=["option", "value", "source"])
    return frame.drop_duplicates(["option", "value"]).reset_index(drop=True)


def _flag(value: str) -> bool:
    return value.strip().lower() in ("true", "1", "yes")


def _trl(o: Mapping[str, str]) -> tuple[dict, dict[str, str], str | None]:
    entry = {"preset": "grpo", "std_ddof": 1, "eps": 1e-4}
    said = {}
    scale = o["scale_rewards"].lower()
    if scale == "batch":
        entry["std_scope"], said["scale_rewards"] = "batch", "std_scope: batch"
    elif scale in ("none", "false"):
        entry["std_power"], said["scale_rewards"] = 0.0, "std_power: 0"
    elif scale in ("group", "true"):
        said["scale_rewards"] = "std_power: 1, std_ddof: 1, eps: 1e-4"
    else:
        return entry, said, f"scale_rewards={o['scale_rewards']!r} is not a TRL value"
    loss = o["loss_type"].lower()
    norms = TRL_LOSS_NORMS
    if loss not in norms:
        return entry, said, f"loss_type={loss!r} (TRL) has no dial setting"
    entry["length_norm"] = norms[loss]
    said["loss_type"] = f"length_norm: {norms[loss]}"
    if loss == "dr_grpo":
        entry["max_length"] = int(float(o.get("max_completion_length", "256")))
        said["max_completion_length"] = f"max_length: {entry['max_length']}"
    if loss == "bnpo":
        entry["bnpo_rows"] = int(float(o.get("per_device_train_batch_size", "8")))
        said["per_device_train_batch_size"] = f"bnpo_rows: {entry['bnpo_rows']}"
    level = o["importance_sampling_level"].lower()
    if level not in ("token", "sequence"):
        return entry, said, f"importance_sampling_level={level!r} has no dial setting"
    if level == "sequence":
        entry["ratio_level"], said["importance_sampling_level"] = (
            "sequence",
            "ratio_level: sequence",
        )
    entry["clip_low"] = float(o["epsilon"])
    entry["clip_high"] = float(o.get("epsilon_high", o["epsilon"]))
    said["epsilon"] = f"clip_low: {entry['clip_low']:g}, clip_high: {entry['clip_high']:g}"
    return entry, said, None


# TRL loss_type -> length_norm (pairs, not a table of arm names: the keys are TRL's values)
TRL_LOSS_NORMS = dict(
    zip(("grpo", "dapo", "dr_grpo", "bnpo", "luspo"),
        ("sequence", "token", "constant", "bnpo", "sequence_sum"), strict=True)
)  # fmt: skip
VERL_ESTIMATORS = {  # adv_estimator -> dial fields (docs/estimators.md)
    "grpo": {"std_ddof": 1, "eps": 1e-6, "singleton": "reward"},
    "grpo_vectorized": {"std_ddof": 1, "eps": 1e-6, "singleton": "reward"},
    "rloo": {"preset": "rloo", "singleton": "reward"},
    "rloo_vectorized": {"preset": "rloo"},
    "opo": {"preset": "opo", "singleton": "reward"},
    "grpo_passk": {"preset": "grpo_passk"},
    "gpg": {"preset": "gpg", "singleton": "reward"},
    "reinforce_plus_plus_baseline": {"preset": "reinforce_pp_baseline", "singleton": "reward"},
    "reinforce_plus_plus": {"preset": "reinforce_pp"},
    "gdpo": {"preset": "gdpo"},  # with one reward component (gdpo_reward_keys unset)
}
VERL_AGG = {"token-mean": "token", "token-sum": "sum", "seq-mean-token-sum": "sequence_sum",
            "seq-mean-token-mean": "sequence", "seq-mean-token-sum-norm": "constant"}  # fmt: skip


def _verl(o: Mapping[str, str]) -> tuple[dict, dict[str, str], str | None]:
    est = o.get("adv_estimator", "").lower()
    if est not in VERL_ESTIMATORS:
        return {}, {}, f"adv_estimator={est or 'gae (default)'!r} (verl) has no dial setting"
    entry = {"preset": "grpo", **VERL_ESTIMATORS[est], "empty_rows": "skip"}
    said = {"adv_estimator": ", ".join(f"{k}: {v}" for k, v in VERL_ESTIMATORS[est].items())}
    if est in ("grpo", "grpo_vectorized", "grpo_passk") and not _flag(o["norm_adv_by_std_in_grpo"]):
        entry["std_power"], said["norm_adv_by_std_in_grpo"] = 0.0, "std_power: 0"
    agg = o["loss_agg_mode"].lower()
    if agg not in VERL_AGG:
        return entry, said, f"loss_agg_mode={agg!r} has no dial setting"
    entry["length_norm"], said["loss_agg_mode"] = VERL_AGG[agg], f"length_norm: {VERL_AGG[agg]}"
    if agg == "seq-mean-token-sum-norm":
        entry["max_length"] = (
            int(float(o["loss_scale_factor"])) if "loss_scale_factor" in o else None
        )
        said["loss_scale_factor"] = f"max_length: {entry['max_length']}"
    mode = o["loss_mode"].lower()
    if mode not in ("vanilla", "gspo"):
        return entry, said, f"policy loss_mode={mode!r} (verl) has no dial setting"
    if mode == "gspo":
        entry["ratio_level"], said["loss_mode"] = "sequence", "ratio_level: sequence"
    low = o.get("clip_ratio_low", o.get("clip_ratio"))
    if low is not None:
        entry["clip_low"] = float(low)
        entry["clip_high"] = float(o.get("clip_ratio_high", o.get("clip_ratio", low)))
        said["clip_ratio_low"] = (
            f"clip_low: {entry['clip_low']:g}, clip_high: {entry['clip_high']:g}"
        )
    return entry, said, None


OPENRLHF_ESTIMATORS = {
    "group_norm": {"preset": "grpo", "std_ddof": 1, "eps": 1e-9},
    "dr_grpo": {"preset": "dr_grpo"},
    "rloo": {"preset": "rloo"},
    "reinforce_baseline": {"preset": "reinforce_pp_baseline", "std_ddof": 0},
    "reinforce": {"preset": "reinforce_pp", "std_ddof": 0},
}


def _openrlhf(o: Mapping[str, str]) -> tuple[dict, dict[str, str], str | None]:
    est = o.get("advantage_estimator", "").lower()
    if est not in OPENRLHF_ESTIMATORS:
        return {}, {}, f"advantage_estimator={est!r} (OpenRLHF) has no dial setting"
    entry = dict(OPENRLHF_ESTIMATORS[est])
    said = {"advantage_estimator": ", ".join(f"{k}: {v}" for k, v in entry.items())}
    if "eps_clip" in o:
        entry["clip_low"] = entry["clip_high"] = float(o["eps_clip"])
        said["eps_clip"] = f"clip_low = clip_high: {entry['clip_low']:g}"
    return entry, said, None


def nearest_preset(dial) -> tuple[str, list[str]]:
    """The preset whose ESTIMATOR_FIELDS differ least from the dial's (an advantage field counts
    twice a loss field: length_norm, ratio_level), and the fields it differs in."""
    from grpo_dial.core.dial import PRESETS

    def differ(name):
        return [f for f in ESTIMATOR_FIELDS if getattr(PRESETS[name], f) != getattr(dial, f)]

    def cost(name):
        return sum(1 if f in ("length_norm", "ratio_level") else 2 for f in differ(name))

    best = min(PRESETS, key=cost)
    return best, differ(best)


def run_estimator(options: pd.DataFrame, fmt: str | None = None) -> tuple[pd.DataFrame, str]:
    """(table, line): each option read or defaulted (COLUMNS; `dial` the setting it maps to)
    and one line naming the engine, the nearest preset and the dial entry, or why none."""
    from grpo_dial.core.arm_names import arm_name
    from grpo_dial.core.dial import dial_from_config

    if options.empty:
        return pd.DataFrame(columns=list(COLUMNS)), "no engine option found in the run's files"
    twice = options.groupby("option")["value"].nunique()
    if (twice > 1).any():
        key = twice[twice > 1].index[0]
        rows = options[options["option"] == key]
        pairs = ", ".join(f"{v} ({s})" for v, s in zip(rows["value"], rows["source"], strict=True))
        return _table(options, {}), f"conflicting values of {key}: {pairs}; no estimator named"
    engines = set(options["option"].map(OPTIONS))
    engine = fmt if fmt in engines else (engines.pop() if len(engines) == 1 else None)
    if engine is None:
        return _table(options, {}), f"options of several engines ({', '.join(sorted(engines))})"
    read = dict(zip(options["option"], options["value"], strict=True))
    o = {**DEFAULTS[engine], **{k: v for k, v in read.items() if OPTIONS[k] == engine}}
    entry, said, why = {"trl": _trl, "verl": _verl, "openrlhf": _openrlhf}[engine](o)
    defaulted = {k: v for k, v in DEFAULTS[engine].items() if k not in read}
    table = _table(options, said, defaulted)
    if why is not None:
        return table, f"{engine}: {why}"
    dial = dial_from_config(dict(entry))  # a one-line error if the mapping were wrong
    name, diff = nearest_preset(dial)
    near = arm_name(name) + (f" with {', '.join(diff)} changed" if diff else "")
    shown = ", ".join(f"{k}: {v}" for k, v in entry.items())
    return table, f"{engine}: {near}; as a dial: {{{shown}}}"


def _table(options: pd.DataFrame, said: Mapping[str, str], defaulted=None) -> pd.DataFrame:
    rows = [{**r, "dial": said.get(r["option"], "")} for r in options.to_dict("records")]
    rows += [{"option": k, "value": v, "source": "default", "dial": said.get(k, "")}
             for k, v in (defaulted or {}).items()]  # fmt: skip
    return pd.DataFrame(rows, columns=list(COLUMNS))
