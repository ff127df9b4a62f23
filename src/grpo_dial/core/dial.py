"""The dial: every choice a group-relative estimator makes, as one frozen dataclass of fields.

GRPO, Dr. GRPO and DAPO differ in what they do with the group std (std_power, std_ddof, eps,
silent) and in how token losses are aggregated (length_norm); the essay's other fixes are more
fields of the same dial: lambda-GRPO's learnable length preference (length_norm='lambda' and the
lambda_* fields, arXiv 2510.06870), Stratified GRPO's stratified advantage normalization (strata,
strata_blend, arXiv 2510.06214) and HA-DW's history-aware difficulty anchor (anchor*, arXiv
2601.08521). The formulas are in grpo_dial.core.advantage, which reads these fields; this module
only holds and checks them, plus the named presets. Unknown names raise and list the valid ones.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, fields, replace
from types import MappingProxyType
from typing import Literal, NamedTuple

from grpo_dial.core.checks import (
    check_at_least,
    check_choice,
    check_int,
    check_positive,
    check_real,
    is_real,
)
from grpo_dial.core.checks import opt as _opt
from grpo_dial.core.estimators import ESTIMATORS

SILENT_CHOICES = ("keep", "drop")
LENGTH_NORM_CHOICES = ("sequence", "token", "constant", "lambda")
ANCHOR_CHOICES = ("none", "batch", "prompt")
ANCHOR_UPDATE_CHOICES = ("paper", "released", "batch_std")  # core.difficulty_anchor.FORMS


@dataclass(frozen=True)
class Dial:
    """Every choice GRPO, Dr. GRPO, DAPO, lambda-GRPO, Stratified GRPO and HA-DW make about the
    group's rewards and the token losses, as independent fields."""

    std_power: float = _opt(
        1.0,
        "alpha in [0,1]: A = (r - mean) / (sigma + eps)**alpha. 1 = GRPO/DAPO (arXiv 2402.03300, "
        "2503.14476): equal weight per informative prompt, step ~ sigma. 0 = Dr. GRPO "
        "(2503.20783): no difficulty reweighting, step ~ sigma^2. Values between interpolate.",
    )
    std_ddof: int = _opt(
        0,
        "0 = population std, the paper's sigma = sqrt(k(G-k))/G. 1 = sample std (torch.std) as "
        "TRL, verl, OpenRLHF and oat use; larger by sqrt(G/(G-1)), so advantages shrink (x0.935 "
        "at G=8). Pick 1 to match a framework's numbers.",
    )
    eps: float = _opt(
        1e-6,
        "Added to sigma before the power; matters only for small sigma (silent groups give 0 "
        "anyway). TRL 1e-4, verl 1e-6 (default), oat 1e-8, OpenRLHF 1e-9. 0 for exact identities.",
    )
    silent: Literal["keep", "drop"] = _opt(
        "keep",
        "Groups whose rewards are all equal (sigma = 0, zero gradient). 'keep' (GRPO, Dr. GRPO, "
        "TRL): they stay and dilute the token/sequence normalizers. 'drop' (DAPO dynamic "
        "sampling): filter them out and refill the batch by sampling again.",
    )
    max_resample_rounds: int = _opt(
        4,
        "With silent='drop', how many extra sampling rounds may refill dropped groups; bounds the "
        "sample cost. The paper's controlled DAPO arm resamples a silent group at most 4 times.",
    )
    length_norm: Literal["sequence", "token", "constant", "lambda"] = _opt(
        "sequence",
        "'sequence' (GRPO, TRL 'grpo'): mean over each response's tokens, then over responses; "
        "favours long wrong and short right answers. 'token' (DAPO, TRL 'dapo'/'bnpo'): batch sum "
        "/ total tokens. 'constant' (Dr. GRPO, TRL 'dr_grpo'): sum / (responses * max_length), "
        "no length bias. 'lambda' (lambda-GRPO, arXiv 2510.06870): the token mean with each "
        "response weighted by a softmax of its group-standardized length to the power lambda.",
    )
    max_length: int | None = _opt(
        None,
        "L_max for length_norm='constant': set it to the generation limit (TRL's "
        "max_completion_length). None uses the padded width of the mask, as verl does, which "
        "makes the normalizer depend on how the batch happened to be padded.",
    )
    clip_low: float = _opt(
        0.2,
        "PPO lower clip: the ratio is floored at 1 - clip_low for negative advantages (0.2 in "
        "PPO, GRPO, DAPO). Binds only when a batch is reused for more than one update.",
    )
    clip_high: float = _opt(
        0.2,
        "PPO upper clip: the ratio is capped at 1 + clip_high for positive advantages. 0.2 is "
        "symmetric PPO/GRPO; DAPO's clip-higher uses 0.28 so rare tokens can still gain "
        "probability (less entropy collapse).",
    )
    lambda_value: float = _opt(
        0.0,
        "lambda of length_norm='lambda': fixed, or the start when lambda_learnable. 0 is exactly "
        "DAPO's token mean; > 0 weights responses longer than their group's mean up, < 0 down.",
    )
    lambda_learnable: bool = _opt(
        False,
        "lambda-GRPO: lambda is a scalar parameter trained with the policy (its own learning "
        "rate lambda_lr, same optimizer), logged per step; false keeps lambda_value fixed.",
    )
    lambda_r: float = _opt(
        1 / 9,
        "r > 0 of lambda-GRPO's lift h = 1 + r z of the standardized length z; 1/9 is the "
        "paper's r (arXiv 2510.06870), 0.25 this project's earlier default. |z| <= sqrt(G - 1) "
        "in a group of G, so r < 1/sqrt(G - 1) keeps h > 0 (1/9: G <= 81); a smaller h is "
        "floored at 1e-3.",
    )
    lambda_lr: float = _opt(
        0.01,
        "Learning rate of a learnable lambda (AdamW moves it by about this much per update).",
    )
    strata: str | None = _opt(
        None,
        "Stratified advantage normalization (Stratified GRPO, arXiv 2510.06214): a stratum key "
        "per response; advantages are computed within each stratum of a group. 'truncated' and "
        "'length_bucket' (above the group's mean length) exist for every task; a task may add "
        "its own (the arithmetic task with tail_checks > 0: 'check_lines'). None: off.",
    )
    strata_blend: float = _opt(
        1.0,
        "beta in [0,1]: A = beta A_stratum + (1 - beta) A_group; 1 = pure stratified "
        "normalization, 0 = the group estimator. The paper blends for finite-sample stability.",
    )
    anchor: Literal["none", "batch", "prompt"] = _opt(
        "none",
        "HA-DW (arXiv 2601.08521): reweight A by Phi = anchor_scale exp(-sgn(A)(p_hat - C)), "
        "boosting correct answers on prompts harder than the anchor C. 'batch': C is the paper's "
        "cross-batch anchor of the policy's accuracy; 'prompt': C is the prompt's running pass "
        "rate (the adaptive arm's tracker). 'none': off.",
    )
    anchor_update: Literal["paper", "released", "batch_std"] = _opt(
        "paper",
        "How the batch anchor follows the accuracy (core.difficulty_anchor): 'paper' (Eqs. "
        "8-11: eta_t = eta sigma_t, sigma_t the std of the previous m beliefs, the running "
        "mean of the accuracies as warm-up for the first m steps), 'released' (the authors' "
        "code: the mean of the last m batch accuracies, the current one included), "
        "'batch_std' (this project's earlier reading: sigma_t over the last m accuracies).",
    )
    anchor_rate: float = _opt(
        0.1,
        "eta in (0, 1] of the batch anchor's update C <- (1 - eta_t) C + eta_t y_t, eta_t = "
        "eta sigma_t ('paper', 'batch_std'; unused by 'released').",
    )
    anchor_scale: float = _opt(
        1.5,
        "lambda_scale > 0 of HA-DW's Phi: 1.5, the paper's best (its Table 7: 48.7 at "
        "1.3-1.5 against 47.4 at 1.0) and the value the authors' code hard-codes; 1.0 is the "
        "unscaled Phi.",
    )
    anchor_window: int = _opt(
        8,
        "m >= 2: the beliefs in sigma_t ('paper'), the batch accuracies averaged "
        "('released', 10 in the authors' code) or in sigma_t ('batch_std').",
    )

    def __post_init__(self) -> None:
        check_real("std_power", self.std_power, 0.0, 1.0)
        check_choice("std_ddof", self.std_ddof, (0, 1))
        check_real("eps", self.eps, 0.0, math.inf, high_open=True)
        check_choice("silent", self.silent, SILENT_CHOICES)
        check_int("max_resample_rounds", self.max_resample_rounds, 0)
        check_choice("length_norm", self.length_norm, LENGTH_NORM_CHOICES)
        if self.max_length is not None:
            check_int("max_length", self.max_length, 1)
        check_real("clip_low", self.clip_low, 0.0, 1.0, high_open=True)
        check_real("clip_high", self.clip_high, 0.0, math.inf)
        check_real("lambda_value", self.lambda_value, -math.inf, math.inf, high_open=True)
        check_choice("lambda_learnable", self.lambda_learnable, (False, True))
        check_positive("lambda_r", self.lambda_r)
        check_positive("lambda_lr", self.lambda_lr)
        if self.lambda_learnable and self.length_norm != "lambda":
            raise ValueError("lambda_learnable needs length_norm='lambda'")
        if self.strata is not None and (not isinstance(self.strata, str) or not self.strata):
            raise ValueError(f"strata must be a stratum key (a name) or None, got {self.strata!r}")
        check_real("strata_blend", self.strata_blend, 0.0, 1.0)
        check_choice("anchor", self.anchor, ANCHOR_CHOICES)
        check_choice("anchor_update", self.anchor_update, ANCHOR_UPDATE_CHOICES)
        if isinstance(self.anchor_rate, bool) or not (
            isinstance(self.anchor_rate, int | float) and 0 < self.anchor_rate <= 1
        ):
            raise ValueError(f"anchor_rate must be in (0, 1], got {self.anchor_rate!r}")
        check_positive("anchor_scale", self.anchor_scale)
        check_int("anchor_window", self.anchor_window, 2)


class _Presets(Mapping):
    """Recipe name -> its Dial: GRPO, Dr. GRPO and DAPO, then the recipe of every registered
    estimator that names one (core.estimators), read live so a new estimator's recipe is here."""

    # Presets leave max_length None because L_max is a generation setting; set it for dr_grpo.
    BASE: Mapping[str, Mapping[str, object]] = MappingProxyType({
        "grpo": {},
        "dr_grpo": {"std_power": 0.0, "length_norm": "constant"},
        "dapo": {"silent": "drop", "length_norm": "token", "clip_high": 0.28},
        # HA-DW as the authors released it (a second recipe of the registered hadw_grpo):
        # the anchor is the mean of the last 10 batch accuracies, lambda_scale 1.5
        "hadw_released": {"anchor": "batch", "anchor_update": "released", "anchor_window": 10},
    })  # fmt: skip

    def _fields(self) -> dict[str, Mapping[str, object]]:
        registered = {n: e.preset for n, e in ESTIMATORS.items() if e.preset is not None}
        return {**self.BASE, **registered}

    def __getitem__(self, name: str) -> Dial:
        return Dial(**self._fields()[name])

    def __iter__(self) -> Iterator[str]:
        return iter(self._fields())

    def __len__(self) -> int:
        return len(self._fields())


# The three fixes beyond GRPO / Dr. GRPO / DAPO start from GRPO's std factor (their recipes are
# registered with them): lambda-GRPO with a learnable lambda from 0 (DAPO's token mean),
# Stratified GRPO on the truncated / finished split every task has, blended half and half, and
# HA-DW on the paper's batch anchor.
PRESETS: Mapping[str, Dial] = _Presets()


def preset(name: str) -> Dial:
    """The named recipe's dial: one of PRESETS."""
    if not isinstance(name, str) or name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; valid presets: {', '.join(sorted(PRESETS))}")
    return PRESETS[name]


def dial_from_config(cfg: Mapping) -> Dial:
    """{"preset": name, field: value, ...} -> the preset (default Dial()) with fields overridden;
    a mapping with keys of an arm's allocation too goes through read_arm instead."""
    _check_keys(cfg, DIAL_KEYS)
    return _dial(cfg)


def _check_keys(spec: Mapping, valid: tuple[str, ...]) -> None:
    if not isinstance(spec, Mapping):
        raise ValueError(f"a dial entry must be a mapping, got {type(spec).__name__}")
    unknown = [k for k in spec if k not in valid]
    if unknown:
        raise ValueError(f"unknown dial key {unknown[0]!r}; valid keys: {', '.join(valid)}")


def _dial(cfg: Mapping, max_new_tokens: int | None = None) -> Dial:
    """The preset with the entry's fields overridden, built (and range-checked) once."""
    base = preset(cfg["preset"]) if "preset" in cfg else Dial()
    over = {k: v for k, v in cfg.items() if k in DIAL_KEYS and k != "preset"}
    constant = over.get("length_norm", base.length_norm) == "constant"
    if constant and over.get("max_length", base.max_length) is None and max_new_tokens is not None:
        over["max_length"] = int(max_new_tokens)
    return replace(base, **over)


@dataclass(frozen=True)
class Allocation:
    """How many responses each prompt of a batch gets (grpo_dial.train.allocation)."""

    scheme: Literal["uniform", "adaptive"] = _opt(
        "uniform",
        "'uniform': every prompt gets group_size responses. 'adaptive': the budget is split by "
        "the closed forms on running pass-rate estimates (a dial's `group_size: adaptive`).",
    )
    signal: Literal["grpo", "dr_grpo", "nonsilent"] = _opt(
        "grpo",
        "What adaptive allocation maximizes per prompt: 'grpo' E[sigma], 'dr_grpo' "
        "p(1-p)(1-1/G), 'nonsilent' 1 - p^G - (1-p)^G.",
    )
    g_min: int = _opt(2, "Adaptive allocation: fewest responses of a sampled prompt.")
    g_max: int = _opt(32, "Adaptive allocation: most responses of one prompt.")
    unanimous: Literal["skip", "minimum"] = _opt(
        "minimum",
        "Adaptive allocation of prompts estimated at p = 0 or 1: 'skip' (not sampled, so the "
        "estimate never changes) or 'minimum' (g_min responses, so a change is noticed).",
    )
    prior_strength: float = _opt(
        8.0,
        "Pseudo-responses of the base pass-rate table in each prompt's running estimate "
        "(at most the table's n).",
    )
    decay: float = _opt(
        0.8,
        "Running estimate: old counts are multiplied by this at each visit of the prompt "
        "(memory ~ 1/(1-decay) visits); 1 keeps everything.",
    )

    def __post_init__(self) -> None:
        choices = {
            "scheme": ("uniform", "adaptive"),
            "signal": ("grpo", "dr_grpo", "nonsilent"),
            "unanimous": ("skip", "minimum"),
        }
        for name, options in choices.items():
            check_choice(name, getattr(self, name), options)
        check_int("g_min", self.g_min, 1)
        check_int("g_max", self.g_max, self.g_min)
        check_at_least("prior_strength", self.prior_strength, 0.0)
        if not (is_real(self.decay) and 0 < self.decay <= 1):
            raise ValueError(f"decay must be in (0, 1], got {self.decay!r}")


DIAL_KEYS = ("preset", *(f.name for f in fields(Dial)))
ALLOCATION_KEYS = ("group_size", "allocation", "backend")  # an arm's keys that are not the dial's
# (backend: own | trl, read by grpo_dial.train.trl_dial.arm_backend)
SETTING_KEYS = tuple(f.name for f in fields(Allocation) if f.name != "scheme")


class Arm(NamedTuple):
    """One `dials.<name>` entry, resolved: the estimator's Dial and the sample Allocation."""

    dial: Dial
    allocation: Allocation


def _settings(settings: Mapping | None, where: str) -> dict:
    """An allocation mapping checked against SETTING_KEYS."""
    settings = dict(settings or {})
    unknown = [k for k in settings if k not in SETTING_KEYS]
    if unknown:
        raise ValueError(
            f"unknown {where} key {unknown[0]!r}; valid keys: {', '.join(SETTING_KEYS)}"
        )
    return settings


def read_arm(
    spec: Mapping, defaults: Mapping | None = None, *, max_new_tokens: int | None = None
) -> Arm:
    """The Arm of one `dials.<name>` entry, every key checked here; `defaults` is
    `train.allocation`. An entry is a dial (a preset plus any Dial field) and, beside it, how
    the arm spreads its samples over prompts:

        grpo:          {preset: grpo}
        grpo_adaptive: {preset: grpo, group_size: adaptive, allocation: {g_max: 8}}

    `group_size` (uniform | adaptive) is Allocation.scheme; `allocation` overrides `defaults` key
    by key. A dial with Dr. GRPO's constant normalizer and no max_length divides by
    max_new_tokens (the generation limit, TRL's max_completion_length) when it is given."""
    _check_keys(spec, (*DIAL_KEYS, *ALLOCATION_KEYS))
    dial = _dial(spec, max_new_tokens)
    allocation = Allocation(
        scheme=spec.get("group_size", "uniform"),
        **{
            **_settings(defaults, "train.allocation"),
            **_settings(spec.get("allocation"), "dial allocation"),
        },
    )
    return Arm(dial, allocation)


def arm_fields(arm: Arm) -> dict:
    """The resolved fields a job rebuilds its Arm from (`arm_from_fields`), plain values only."""
    return {"dial": asdict(arm.dial), "allocation": asdict(arm.allocation)}


def arm_from_fields(resolved: Mapping) -> Arm:
    """An Arm from `arm_fields`: each dataclass runs its own checks once, nothing is re-read."""
    return Arm(Dial(**resolved["dial"]), Allocation(**resolved["allocation"]))
