"""Which estimator a logged run used, read from its saved config: each engine option the files
state (external.engine_options, read by its path in the config) mapped to the dial setting that
reproduces it at the run's engine release (external.engine_releases; docs/estimators.md, "Your
engine's config as a dial"), and the preset nearest to the result.

Mapping. The engine is the one whose options were found (`fmt` breaks a tie). Options the files
do not state take the release's default (e.g. TRL: scale_rewards 'group', loss_type 'dapo',
max_completion_length 256 before 1.10.0 and 512 from it; verl: adv_estimator 'gae', loss_agg_mode
'token-mean'), and the table says which were defaults. A null value means what the engine makes
of it (TRL's epsilon_high: epsilon; verl's loss_scale_factor: the padded width). A key read with
two values is a conflict: both sources are named and no estimator is. An option value with no dial
setting (TRL's cispo / sapo / vespo, verl's gae / remax, GDPO over several rewards, a policy loss
other than vanilla / gspo) is named, and no dial is built; a value that is not the engine's at
all, or a number that is not one (`auto`, `nan`, 0 completions, a batch of 0), is a one-line
error naming the option and its file. Filtering options (verl's filter_groups, OpenRLHF's
dynamic_filtering) set `silent: drop`; TRL's mask_truncated_completions has no dial setting and
is named beside the dial.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd

from grpo_dial.external import engine_releases as releases
from grpo_dial.external.engine_options import RunConfig
from grpo_dial.external.engine_releases import DEFAULTS, NEWEST, TRL_LOSS_SINCE, at_least

COLUMNS = ("option", "value", "source", "dial")
ESTIMATOR_FIELDS = (
    "std_power", "baseline", "std_scope", "gpg_scale", "whiten", "ratio_level", "length_norm",
    "silent",
)  # fmt: skip
# TRL loss_type -> length_norm (pairs, not a table of arm names: the keys are TRL's values)
TRL_LOSS_NORMS = dict(
    zip(("grpo", "dapo", "dr_grpo", "bnpo", "luspo"),
        ("sequence", "token", "constant", "bnpo", "sequence_sum"), strict=True)
)  # fmt: skip
TRL_NO_DIAL = ("cispo", "sapo", "vespo")
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
    "gdpo": {"preset": "gdpo"},  # one reward component (gdpo_reward_keys unset or one key)
}
VERL_NO_DIAL = ("gae", "remax", "optimal_token_baseline", "tir_optimal_token_baseline")
VERL_AGG = {"token-mean": "token", "token-sum": "sum", "seq-mean-token-sum": "sequence_sum",
            "seq-mean-token-mean": "sequence", "seq-mean-token-sum-norm": "constant"}  # fmt: skip
OPENRLHF_ESTIMATORS = {
    "group_norm": {"preset": "grpo", "std_ddof": 1, "eps": 1e-9},
    "dr_grpo": {"preset": "dr_grpo"},
    "rloo": {"preset": "rloo"},
    "reinforce_baseline": {"preset": "reinforce_pp_baseline", "std_ddof": 0},
    "reinforce": {"preset": "reinforce_pp", "std_ddof": 0},
}
OPENRLHF_NO_DIAL = ("gae", "flash_reinforce")


class _Options:
    """An engine's options (stated or defaulted) with the file each came from, for values
    checked in one line that names option and file."""

    def __init__(self, engine: str, values: Mapping[str, str], sources: Mapping[str, str]):
        self.engine, self.values, self.sources = engine, dict(values), sources

    def __contains__(self, key: str) -> bool:
        return key in self.values

    def text(self, key: str) -> str | None:
        value = self.values.get(key)
        return None if value in (None, "None") else str(value)

    def bad(self, key: str, what: str) -> ValueError:
        where = self.sources.get(key, "default")
        return ValueError(f"{self.engine} option {key}={self.values.get(key)!r} in {where}: {what}")

    def number(self, key: str, kind: type = float, low: float = 0.0, strict: bool = False):
        """The option as a finite number >= low (> low when strict), else a one-line error."""
        text = self.text(key)
        try:
            value = float(text) if text is not None else math.nan
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value < low or (strict and value == low):
            need = f"{'>' if strict else '>='} {low:g}"
            raise self.bad(key, f"not a finite number {need}")
        if kind is int:
            if not value.is_integer():
                raise self.bad(key, "not a whole number")
            return int(value)
        return value

    def flag(self, key: str) -> bool:
        text = (self.text(key) or "").strip().lower()
        if text in ("true", "1", "yes", "on"):
            return True
        if text in ("false", "0", "no", "off"):
            return False
        raise self.bad(key, "not true or false")

    def choice(self, key: str, valid: tuple[str, ...]) -> str:
        text = (self.text(key) or "").strip().lower()
        if text not in valid:
            raise self.bad(key, f"not one of {', '.join(valid)}")
        return text


def _sizes(o: _Options, keys: tuple[str, ...]) -> None:
    """Counts the engine refuses below 1 (a batch, a completion limit, G), checked where stated
    whether or not the dial uses them."""
    for key in keys:
        if o.text(key) is not None:
            o.number(key, int, 0, strict=True)


def _trl(o: _Options, release: str) -> tuple[dict, dict[str, str], str | None, list[str]]:
    entry, said, notes = {"preset": "grpo", "std_ddof": 1, "eps": 1e-4}, {}, []
    _sizes(o, ("per_device_train_batch_size", "num_generations", "max_completion_length"))
    scale = o.choice("scale_rewards", ("group", "true", "batch", "none", "false"))
    if scale == "batch":
        entry["std_scope"], said["scale_rewards"] = "batch", "std_scope: batch"
    elif scale in ("none", "false"):
        entry["std_power"], said["scale_rewards"] = 0.0, "std_power: 0"
    else:
        said["scale_rewards"] = "std_power: 1, std_ddof: 1, eps: 1e-4"
    loss = o.choice("loss_type", (*TRL_LOSS_NORMS, *TRL_NO_DIAL))
    if not at_least(release, TRL_LOSS_SINCE[loss]):
        why = f"loss_type={loss!r} is not in TRL {release} (from {TRL_LOSS_SINCE[loss]})"
        return entry, said, why, notes
    if loss in TRL_NO_DIAL:
        return entry, said, f"loss_type={loss!r} (TRL) has no dial setting", notes
    entry["length_norm"] = TRL_LOSS_NORMS[loss]
    said["loss_type"] = f"length_norm: {TRL_LOSS_NORMS[loss]}"
    if loss == "dr_grpo":
        entry["max_length"] = o.number("max_completion_length", int, 0, strict=True)
        said["max_completion_length"] = f"max_length: {entry['max_length']}"
    if loss == "bnpo":
        entry["bnpo_rows"] = o.number("per_device_train_batch_size", int, 0, strict=True)
        said["per_device_train_batch_size"] = f"bnpo_rows: {entry['bnpo_rows']}"
    if o.choice("importance_sampling_level", ("token", "sequence")) == "sequence":
        entry["ratio_level"] = "sequence"
        said["importance_sampling_level"] = "ratio_level: sequence"
    entry["clip_low"] = o.number("epsilon")
    entry["clip_high"] = o.number("epsilon_high") if o.text("epsilon_high") else entry["clip_low"]
    said["epsilon"] = f"clip_low: {entry['clip_low']:g}"
    said["epsilon_high"] = f"clip_high: {entry['clip_high']:g}"
    if o.choice("multi_objective_aggregation", ("sum_then_normalize", "normalize_then_sum")) == (
        "normalize_then_sum"
    ):
        weights = o.text("reward_weights")
        if weights and weights.count(",") >= 1:
            why = "multi_objective_aggregation='normalize_then_sum' (GDPO) over several rewards"
            return entry, said, f"{why} has no dial setting", notes
        entry.pop("std_scope", None)
        entry.pop("std_power", None)
        entry["whiten"] = "response"
        said["multi_objective_aggregation"] = "whiten: response (GDPO, one reward function)"
        notes.append("GDPO with one reward function: group std, then the batch's std over "
                     "responses (TRL divides by std + 1e-4, the dial by sqrt(var + 1e-8)); "
                     "several reward functions have no dial setting")  # fmt: skip
    if o.flag("mask_truncated_completions"):
        said["mask_truncated_completions"] = "no dial setting"
        notes.append("mask_truncated_completions: truncated responses leave the loss "
                     "(no dial setting)")  # fmt: skip
    return entry, said, None, notes


def _verl(o: _Options, release: str) -> tuple[dict, dict[str, str], str | None, list[str]]:
    est = (o.text("adv_estimator") or "").lower()
    notes: list[str] = []
    _sizes(o, ("rollout.n",))
    if est in VERL_NO_DIAL:
        return {}, {}, f"adv_estimator={est!r} (verl) has no dial setting", notes
    if est not in VERL_ESTIMATORS:
        raise o.bad("adv_estimator", "not a verl estimator")
    if est == "gdpo" and not at_least(release, "0.7.1"):
        return {}, {}, f"adv_estimator='gdpo' is not in verl {release} (from 0.7.1)", notes
    entry = {"preset": "grpo", **VERL_ESTIMATORS[est], "empty_rows": "skip"}
    said = {"adv_estimator": ", ".join(f"{k}: {v}" for k, v in VERL_ESTIMATORS[est].items())}
    if est == "gdpo":
        keys = o.text("gdpo_reward_keys")
        if keys and keys.count(",") >= 1:
            why = f"adv_estimator='gdpo' over gdpo_reward_keys={keys} (several rewards)"
            return entry, said, f"{why} has no dial setting", notes
    if est in ("grpo", "grpo_vectorized", "grpo_passk") and not o.flag("norm_adv_by_std_in_grpo"):
        entry["std_power"], said["norm_adv_by_std_in_grpo"] = 0.0, "std_power: 0"
    agg = o.choice("loss_agg_mode", tuple(VERL_AGG))
    entry["length_norm"], said["loss_agg_mode"] = VERL_AGG[agg], f"length_norm: {VERL_AGG[agg]}"
    if agg == "seq-mean-token-sum-norm":
        factor = o.text("loss_scale_factor") if at_least(release, "0.7.0") else None
        width = o.number("loss_scale_factor", int, 0, strict=True) if factor else None
        shown = width if width is not None else "the padded width"
        if at_least(release, "0.7.1"):
            entry["max_length"] = width
            said["loss_scale_factor"] = f"max_length: {width}"
        else:  # loss = sum(seq_losses) / L: no division by the B responses
            entry["length_norm"] = "sum"
            said["loss_agg_mode"] = "length_norm: sum (then / L)"
            notes.append(f"verl {release} divides the token sum by L = {shown} alone (B times "
                         "the constant normalizer of 0.7.1 on): length_norm: sum, scaled by 1/L")
    mode = (o.text("loss_mode") or "").lower()
    if mode not in ("vanilla", "gspo"):
        return entry, said, f"policy loss_mode={mode!r} (verl) has no dial setting", notes
    if mode == "gspo":
        entry["ratio_level"], said["loss_mode"] = "sequence", "ratio_level: sequence"
    low_key = "clip_ratio_low" if o.text("clip_ratio_low") else "clip_ratio"
    high_key = "clip_ratio_high" if o.text("clip_ratio_high") else "clip_ratio"
    entry["clip_low"], entry["clip_high"] = o.number(low_key), o.number(high_key)
    said[low_key] = f"clip_low: {entry['clip_low']:g}"
    high = f"clip_high: {entry['clip_high']:g}"
    said[high_key] = f"{said[low_key]}, {high}" if high_key == low_key else high
    if o.flag("filter_groups.enable"):
        entry["silent"], said["filter_groups.enable"] = "drop", "silent: drop"
        if "filter_groups.max_num_gen_batches" in o:
            n = o.number("filter_groups.max_num_gen_batches", int)
            if n > 0:
                entry["max_resample_rounds"] = n - 1
                said["filter_groups.max_num_gen_batches"] = f"max_resample_rounds: {n - 1}"
    return entry, said, None, notes


def _openrlhf(o: _Options, release: str) -> tuple[dict, dict[str, str], str | None, list[str]]:
    est = (o.text("advantage_estimator") or "").lower()
    _sizes(o, ("n_samples_per_prompt",))
    if est in OPENRLHF_NO_DIAL:
        return {}, {}, f"advantage_estimator={est!r} (OpenRLHF) has no dial setting", []
    if est not in OPENRLHF_ESTIMATORS:
        raise o.bad("advantage_estimator", "not an OpenRLHF estimator")
    entry = dict(OPENRLHF_ESTIMATORS[est])
    said = {"advantage_estimator": ", ".join(f"{k}: {v}" for k, v in entry.items())}
    agg = o.choice("actor.loss_agg_mode", ("token-mean", "seq-mean-token-mean"))
    entry["length_norm"] = "token" if agg == "token-mean" else "sequence"
    said["actor.loss_agg_mode"] = f"length_norm: {entry['length_norm']}"
    pair = o.text("eps_clip_low_high")
    if pair:
        low, high = (_Options(o.engine, {"eps_clip_low_high": v}, o.sources).number(
            "eps_clip_low_high") for v in pair.strip("[]()").split(","))  # fmt: skip
        entry["clip_low"], entry["clip_high"] = low, high
        said["eps_clip_low_high"] = f"clip_low: {low:g}, clip_high: {high:g}"
    else:
        entry["clip_low"] = entry["clip_high"] = o.number("eps_clip")
        said["eps_clip"] = f"clip_low = clip_high: {entry['clip_low']:g}"
    if o.flag("dynamic_filtering"):
        bounds = [float(v) for v in (o.text("dynamic_filtering_range") or "[0, 1]")
                  .strip("[]()").split(",")]  # fmt: skip
        if bounds != [0.0, 1.0]:
            why = f"dynamic_filtering over the mean-reward range {bounds}"
            return entry, said, f"{why} has no dial setting (silent: drop is (0, 1))", []
        entry["silent"], said["dynamic_filtering"] = "drop", "silent: drop"
    return entry, said, None, []


MAPPERS = {"trl": _trl, "verl": _verl, "openrlhf": _openrlhf}


def nearest_preset(dial, prefer: str | None = None) -> tuple[str, list[str]]:
    """The preset whose ESTIMATOR_FIELDS differ least from the dial's (an advantage field counts
    twice a loss field: length_norm, ratio_level), and the fields it differs in; a tie goes to
    `prefer` (the preset the engine's estimator maps to), then to PRESETS' order."""
    from grpo_dial.core.dial import PRESETS

    def differ(name):
        return [f for f in ESTIMATOR_FIELDS if getattr(PRESETS[name], f) != getattr(dial, f)]

    def cost(name):
        return sum(1 if f in ("length_norm", "ratio_level") else 2 for f in differ(name))

    best = min(PRESETS, key=lambda name: (cost(name), name != prefer))
    return best, differ(best)


def engine_release(run: RunConfig, engine: str, version: str | None) -> tuple[str, str]:
    """(release, how it was found): `version` (--engine-version), a version the files state,
    a verl marker path or OpenRLHF's argument names; else the newest, 'unknown'."""
    if version:
        return releases.check_version(engine, version), "--engine-version"
    if engine in run.stated:
        release, source = run.stated[engine]
        return release, source
    if engine == "verl" and (release := releases.verl_release_from_paths(run.paths)):
        later = "or earlier" if release == "0.6.0" else "or later"
        return release, f"{later}, by its config's paths"
    if engine == "openrlhf":
        option_paths = run.options.loc[run.options["engine"] == "openrlhf", "path"]
        if release := releases.openrlhf_release_from_paths(option_paths):
            later = "or later" if release == "0.10.2" else "or earlier"
            return release, f"{later}, by its argument names"
    return NEWEST[engine], "unknown: the newest release's defaults"


def run_estimator(
    run: RunConfig, fmt: str | None = None, version: str | None = None
) -> tuple[pd.DataFrame, str]:
    """(table, line): each option read or defaulted (COLUMNS; `dial` the setting it maps to)
    and one line naming the engine and release, the nearest preset and the dial entry, or why
    none. Raises a one-line ValueError naming option and file for a value the engine refuses."""
    table, line, _ = estimate(run, fmt, version)
    return table, line


def estimate(
    run: RunConfig, fmt: str | None = None, version: str | None = None
) -> tuple[pd.DataFrame, str, dict | None]:
    """run_estimator's (table, line) and the dial entry the config maps to (None if none)."""
    from grpo_dial.core.arm_names import arm_name
    from grpo_dial.core.dial import dial_from_config

    options = run.options
    if options.empty:
        empty = pd.DataFrame(columns=list(COLUMNS))
        return empty, "no engine option found in the run's files", None
    twice = options.groupby("option")["value"].nunique()
    if (twice > 1).any():
        key = twice[twice > 1].index[0]
        rows = options[options["option"] == key]
        pairs = ", ".join(f"{v} ({s})" for v, s in zip(rows["value"], rows["source"], strict=True))
        conflict = f"conflicting values of {key}: {pairs}; no estimator named"
        return _table(options, {}), conflict, None
    engines = set(options["engine"])
    engine = fmt if fmt in engines else (engines.pop() if len(engines) == 1 else None)
    if engine is None:
        several = f"options of several engines ({', '.join(sorted(engines))})"
        return _table(options, {}), several, None
    release, how = engine_release(run, engine, version)
    mine = options[options["engine"] == engine]
    read = dict(zip(mine["option"], mine["value"], strict=True))
    defaults = DEFAULTS[engine](release)
    sources = dict(zip(mine["option"], mine["source"], strict=True))
    o = _Options(engine, {**defaults, **read}, sources)
    entry, said, why, notes = MAPPERS[engine](o, release)
    table = _table(mine, said, {k: v for k, v in defaults.items() if k not in read})
    tail = f"; release {release} ({how})"
    if why is not None:
        return table, f"{engine}: {why}{tail}", None
    dial = dial_from_config(dict(entry))  # a one-line error if the mapping were wrong
    name, diff = nearest_preset(dial, prefer=entry.get("preset"))
    near = arm_name(name) + (f" with {', '.join(diff)} changed" if diff else "")
    shown = ", ".join(f"{k}: {v}" for k, v in entry.items())
    filtering = "silent groups dropped and refilled" if entry.get("silent") == "drop" else "none"
    extra = "".join(f"; {n}" for n in notes)
    line = f"{engine}: {near}; as a dial: {{{shown}}}; filtering: {filtering}{extra}{tail}"
    return table, line, entry


def _table(options: pd.DataFrame, said: Mapping[str, str], defaulted=None) -> pd.DataFrame:
    rows = [{**r, "dial": said.get(r["option"], "")} for r in options.to_dict("records")]
    rows += [{"option": k, "value": v, "source": "default", "dial": said.get(k, "")}
             for k, v in (defaulted or {}).items()]  # fmt: skip
    return pd.DataFrame(rows, columns=list(COLUMNS))
