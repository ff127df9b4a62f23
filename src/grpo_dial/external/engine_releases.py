"""What each engine release does with the options diagnose reads: defaults and semantics per
release, and the release a run's files name.

Read from the engines' own sources (`tools/engine_configs.py` downloads them and writes the
test corpus `tests/external/engine_configs/`; `tests/external/test_engine_corpus.py` checks
these facts against it):
- TRL (0.24-1.16): `max_completion_length` defaults to 256 before 1.10.0 and to 512 from 1.10.0
  (Dr. GRPO's constant normalizer); `loss_type` cispo and sapo exist from 0.26.0, luspo from
  0.28.0, vespo from 1.0.0; `multi_objective_aggregation` from 0.27.0.
- verl (0.5-0.9.1): `seq-mean-token-sum-norm` divides the token sum by L alone up to 0.7.0
  (`loss = sum(seq_losses) / L`: `length_norm: sum` scaled by 1/L, B times Dr. GRPO's) and by
  B x L from 0.7.1 (`length_norm: constant`); L = `loss_scale_factor` from 0.7.0 (null: the
  padded width), the padded width before; `gdpo` exists from 0.7.1.
- OpenRLHF (0.9-0.11): options by their names before 0.10.2 (`--advantage_estimator`,
  `--eps_clip`, `--dynamic_filtering`) and from 0.10.2 (`--algo.advantage.estimator`,
  `--actor.eps_clip`, `--algo.dynamic_filtering_enable`); `flash_reinforce` from 0.11.2.

A release is named by `--engine-version`, else by the files: a version string (TRL's model
card `- TRL: 1.16.0`, `trl==1.16.0`, `verl==0.9.1`, `openrlhf==0.11.2`), else (verl) the
newest release whose marker path the composed config holds (0.6.0 or earlier for a composed
config with none), else (OpenRLHF) the argument
names; otherwise it is unknown and the newest release's defaults are used, which the line says.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

NEWEST = {"trl": "1.16.0", "verl": "0.9.1", "openrlhf": "0.11.2"}
# the corpus' releases (tools/engine_configs.py RELEASES), oldest first
RELEASES = {
    "trl": ("0.24.0", "0.25.1", "0.26.2", "0.27.2", "0.28.0", "0.29.1", "1.0.0", "1.1.0",
            "1.2.0", "1.3.0", "1.4.0", "1.5.1", "1.6.0", "1.7.1", "1.8.0", "1.9.2", "1.10.0",
            "1.11.0", "1.12.0", "1.13.0", "1.14.2", "1.15.0", "1.16.0"),
    "verl": ("0.5.0", "0.6.0", "0.6.1", "0.7.0", "0.7.1", "0.8.0", "0.9.0", "0.9.1"),
    "openrlhf": ("0.9.0", "0.9.10", "0.10.0", "0.10.1.post2", "0.10.2", "0.10.4", "0.11.0",
                 "0.11.2"),
}  # fmt: skip
TRL_LOSS_SINCE = {"grpo": "0", "dapo": "0", "bnpo": "0", "dr_grpo": "0", "cispo": "0.26.0",
                  "sapo": "0.26.0", "luspo": "0.28.0", "vespo": "1.0.0"}  # fmt: skip
# verl: a path first in the release's composed config and in every later one (newest first)
VERL_MARKERS = (
    ("0.9.0", "actor_rollout_ref.actor.policy_loss.dro_beta"),
    ("0.8.0", "distillation.distillation_loss.loss_mode"),
    ("0.7.1", "actor_rollout_ref.actor.calculate_sum_pi_squared"),
    ("0.7.0", "actor_rollout_ref.actor.loss_scale_factor"),
    ("0.6.1", "algorithm.rollout_correction.rollout_is_threshold"),
)
_VERSION = r"v?(\d+\.\d+(?:\.\d+)?(?:\.post\d+)?)"
_STATED = {
    "trl": re.compile(rf"(?:^|\n)\s*-\s*TRL:\s*{_VERSION}|\btrl\s*==\s*{_VERSION}", re.I),
    "verl": re.compile(rf"\bverl\s*==\s*{_VERSION}|\bverl[_ ]version\W+{_VERSION}", re.I),
    "openrlhf": re.compile(rf"\bopenrlhf\s*==\s*{_VERSION}", re.I),
}


def release_key(version: str) -> tuple[int, ...]:
    """'0.10.1.post2' -> (0, 10, 1, 2): orders releases."""
    return tuple(int(n) for n in re.findall(r"\d+", version))


def at_least(version: str, since: str) -> bool:
    return release_key(version) >= release_key(since)


def check_version(engine: str, version: str) -> str:
    """A stated release, checked: digits and dots, at most the newest known (one-line error)."""
    if not re.fullmatch(_VERSION, version.strip()):
        raise ValueError(f"--engine-version {version!r} is not a release number (e.g. 1.16.0)")
    return version.strip().lstrip("v")


def stated_release(engine: str, texts: Iterable[tuple[str, str]]) -> tuple[str, str] | None:
    """(release, source) from the first (source, text) naming the engine's version."""
    for source, text in texts:
        m = _STATED[engine].search(text)
        if m:
            return next(g for g in m.groups() if g), source
    return None


VERL_COMPOSED = "actor_rollout_ref.actor.ppo_mini_batch_size"  # in every release's config


def verl_release_from_paths(paths: Iterable[str]) -> str | None:
    """The newest release (at least) whose VERL_MARKERS path a composed config holds; '0.6.0'
    (or earlier) for a composed config (VERL_COMPOSED) that holds none; None for a partial one
    (an overrides file)."""
    held = set(paths)
    if VERL_COMPOSED not in held:  # a partial config may set a marker path by hand
        return None
    return next((release for release, marker in VERL_MARKERS if marker in held), "0.6.0")


def openrlhf_release_from_paths(paths: Iterable[str]) -> str | None:
    """'>= 0.10.2' names (algo.*, actor.*) -> '0.10.2'; the old names -> '0.10.1.post2' (or
    earlier); None without any."""
    paths = set(paths)
    if any(p.startswith(("algo.", "actor.", "rollout.")) for p in paths):
        return "0.10.2"
    return "0.10.1.post2" if paths else None


def trl_defaults(release: str) -> Mapping[str, str]:
    """GRPOConfig's defaults of the options diagnose maps, at a TRL release."""
    return {
        "scale_rewards": "group",
        "loss_type": "dapo",
        "importance_sampling_level": "token",
        "epsilon": "0.2",
        "epsilon_high": "None",
        "max_completion_length": "512" if at_least(release, "1.10.0") else "256",
        "per_device_train_batch_size": "8",
        "mask_truncated_completions": "false",
        "multi_objective_aggregation": "sum_then_normalize",
    }


def verl_defaults(release: str) -> Mapping[str, str]:
    """verl's composed-config defaults of the options diagnose maps, at a release."""
    out = {
        "adv_estimator": "gae",
        "norm_adv_by_std_in_grpo": "true",
        "loss_agg_mode": "token-mean",
        "loss_mode": "vanilla",
        "clip_ratio": "0.2",
        "filter_groups.enable": "false",
    }
    if at_least(release, "0.7.0"):
        out["loss_scale_factor"] = "None"
    return out


def openrlhf_defaults(release: str) -> Mapping[str, str]:
    return {"advantage_estimator": "gae", "eps_clip": "0.2", "dynamic_filtering": "false",
            "dynamic_filtering_range": "[0, 1]", "actor.loss_agg_mode": "token-mean"}  # fmt: skip


DEFAULTS = {"trl": trl_defaults, "verl": verl_defaults, "openrlhf": openrlhf_defaults}
