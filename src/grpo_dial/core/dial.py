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
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType
from typing import Literal

SILENT_CHOICES = ("keep", "drop")
LENGTH_NORM_CHOICES = ("sequence", "token", "constant", "lambda")
ANCHOR_CHOICES = ("none", "batch", "prompt")
ANCHOR_UPDATE_CHOICES = ("paper", "released", "batch_std")  # core.difficulty_anchor.FORMS


def _opt(default: object, text: str) -> object:
    return field(default=default, metadata={"help": text})


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
        _check_real("std_power", self.std_power, 0.0, 1.0)
        _check_choice("std_ddof", self.std_ddof, (0, 1))
        _check_real("eps", self.eps, 0.0, math.inf, high_open=True)
        _check_choice("silent", self.silent, SILENT_CHOICES)
        _check_int("max_resample_rounds", self.max_resample_rounds, 0)
        _check_choice("length_norm", self.length_norm, LENGTH_NORM_CHOICES)
        if self.max_length is not None:
            _check_int("max_length", self.max_length, 1)
        _check_real("clip_low", self.clip_low, 0.0, 1.0, high_open=True)
        _check_real("clip_high", self.clip_high, 0.0, math.inf)
        _check_real("lambda_value", self.lambda_value, -math.inf, math.inf, high_open=True)
        _check_choice("lambda_learnable", self.lambda_learnable, (False, True))
        _check_positive("lambda_r", self.lambda_r)
        _check_positive("lambda_lr", self.lambda_lr)
        if self.lambda_learnable and self.length_norm != "lambda":
            raise ValueError("lambda_learnable needs length_norm='lambda'")
        if self.strata is not None and (not isinstance(self.strata, str) or not self.strata):
            raise ValueError(f"strata must be a stratum key (a name) or None, got {self.strata!r}")
        _check_real("strata_blend", self.strata_blend, 0.0, 1.0)
        _check_choice("anchor", self.anchor, ANCHOR_CHOICES)
        _check_choice("anchor_update", self.anchor_update, ANCHOR_UPDATE_CHOICES)
        if isinstance(self.anchor_rate, bool) or not (
            isinstance(self.anchor_rate, int | float) and 0 < self.anchor_rate <= 1
        ):
            raise ValueError(f"anchor_rate must be in (0, 1], got {self.anchor_rate!r}")
        _check_positive("anchor_scale", self.anchor_scale)
        _check_int("anchor_window", self.anchor_window, 2)


def _check_real(name: str, v: object, lo: float, hi: float, high_open: bool = False) -> None:
    if isinstance(v, bool) or not isinstance(v, int | float) or math.isnan(v):
        raise ValueError(f"{name} must be a number, got {v!r} ({type(v).__name__})")
    if not (lo <= v < hi if high_open else lo <= v <= hi):
        raise ValueError(f"{name} must be in [{lo}, {hi}{')' if high_open else ']'}, got {v!r}")


def _check_positive(name: str, v: object) -> None:
    if isinstance(v, bool) or not isinstance(v, int | float) or not 0 < v < math.inf:
        raise ValueError(f"{name} must be a finite number > 0, got {v!r}")


def _check_int(name: str, v: object, lo: int) -> None:
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        raise ValueError(f"{name} must be an integer >= {lo}, got {v!r}")


def _check_choice(name: str, v: object, choices: tuple) -> None:
    if v not in choices or type(v) not in {type(c) for c in choices}:
        raise ValueError(
            f"{name}={v!r} is not valid; choose one of {', '.join(map(repr, choices))}"
        )


# Presets leave max_length None because L_max is a generation setting; set it for dr_grpo.
# The three fixes beyond GRPO / Dr. GRPO / DAPO start from GRPO's std factor: lambda-GRPO with
# a learnable lambda from 0 (DAPO's token mean), Stratified GRPO on the truncated / finished
# split that every task has, blended half and half, and HA-DW on the paper's batch anchor
# (Eqs. 8-11) or, as hadw_released, on the authors' released one (mean of the last 10 batch
# accuracies); both with the lambda_scale 1.5 of the paper's Table 7 and the released code.
PRESETS: Mapping[str, Dial] = MappingProxyType(
    {
        "grpo": Dial(),
        "dr_grpo": Dial(std_power=0.0, length_norm="constant"),
        "dapo": Dial(silent="drop", length_norm="token", clip_high=0.28),
        "lambda_grpo": Dial(length_norm="lambda", lambda_learnable=True),
        "stratified_grpo": Dial(strata="truncated", strata_blend=0.5),
        "hadw_grpo": Dial(anchor="batch"),
        "hadw_released": Dial(anchor="batch", anchor_update="released", anchor_window=10),
    }
)


def preset(name: str) -> Dial:
    """The named recipe's dial: one of PRESETS."""
    if not isinstance(name, str) or name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; valid presets: {', '.join(sorted(PRESETS))}")
    return PRESETS[name]


def dial_from_config(cfg: Mapping) -> Dial:
    """{"preset": name, field: value, ...} -> the preset (default Dial()) with fields overridden."""
    if not isinstance(cfg, Mapping):
        raise ValueError(f"dial config must be a mapping, got {type(cfg).__name__}")
    valid = ["preset"] + [f.name for f in fields(Dial)]
    for key in cfg:
        if key not in valid:
            raise ValueError(f"unknown dial config key {key!r}; valid keys: {', '.join(valid)}")
    base = preset(cfg["preset"]) if "preset" in cfg else Dial()
    return replace(base, **{k: v for k, v in cfg.items() if k != "preset"})
