"""Group-relative advantages, PPO clipped surrogate and token-loss aggregation, set by one dial.

For a group g of G responses with rewards r_i (any reals; {0,1} from a verifier), k = sum_i r_i,
mean_g = k/G and std sigma_g with ddof d (d=0: population, d=1: sample),

    A_i = (r_i - mean_g) / (sigma_g + eps) ** alpha                      alpha = std_power in [0, 1]

alpha=1 is GRPO/DAPO, alpha=0 is Dr. GRPO (A_i = r_i - mean_g). A group whose rewards are all
equal (sigma_g = 0, "silent"; every singleton group is one) gets A_i = 0 exactly, even for eps = 0.

Per-token PPO loss with ratio rho = exp(logp - old_logp):
    l_it = -min(rho_it A_i, clip(rho_it, 1 - clip_low, 1 + clip_high) A_i),
reduced over B responses with 0/1 mask m_it and lengths |o_i| = sum_t m_it in one of three ways:
    sequence (GRPO):     (1/B) sum_i (1/max(|o_i|, 1)) sum_t m_it l_it
    token (DAPO):        sum_it m_it l_it / max(sum_it m_it, 1)
    constant (Dr. GRPO): sum_it m_it l_it / (B * L_max)
These are TRL's loss_type "grpo", "dapo"/"bnpo" and "dr_grpo". Empty responses count in B.
Each is a weighted sum sum_it w_it l_it with per-token weights w_it that depend on the masks
only (`make_token_weights`): m_it / (B max(|o_i|, 1)), m_it / max(sum m, 1), m_it / (B L_max).
So the weights of a whole batch can be fixed before any forward and the loss summed over
buckets of rows (`weighted_policy_loss`), each bucket's backward taken on its own.

Identity (arXiv 2607.00152): binary rewards, 0 < k < G, population sigma = sqrt(k(G-k))/G, eps = 0,
score vectors s_i with mean s+ over correct and s- over incorrect responses, any dimension:
    (1/G) sum_i A_i s_i = sigma^(2 - alpha) (s+ - s-)
(sigma for GRPO, sigma^2 for Dr. GRPO); `group_update` computes the left side. With ddof=1 the
right side is sigma_pop^2 / sigma_sample^alpha (s+ - s-), sigma_sample = sigma_pop sqrt(G/(G-1)).

Group ids are arbitrary integers; groups are numbered 0..M-1 in sorted order of their ids
(torch.unique), so row j of every (M,) or (M, D) output belongs to `GroupStats.ids[j]`.

Departures: TRL, verl, OpenRLHF and oat all use ddof=1; the presets use the paper's population
std. `Dial(std_ddof=1, eps=1e-4)` reproduces TRL exactly. Refilling dropped groups (DAPO dynamic
sampling) needs generation, so it lives in the trainer; this module only says which to drop.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from functools import partial
from types import MappingProxyType
from typing import Literal, NamedTuple

import torch
from torch import Tensor

SILENT_CHOICES = ("keep", "drop")
LENGTH_NORM_CHOICES = ("sequence", "token", "constant")


def _opt(default: object, text: str) -> object:
    return field(default=default, metadata={"help": text})


@dataclass(frozen=True)
class Dial:
    """Every choice GRPO, Dr. GRPO and DAPO make about the group std, as independent fields."""

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
    length_norm: Literal["sequence", "token", "constant"] = _opt(
        "sequence",
        "'sequence' (GRPO, TRL 'grpo'): mean over each response's tokens, then over responses; "
        "favours long wrong and short right answers. 'token' (DAPO, TRL 'dapo'/'bnpo'): batch sum "
        "/ total tokens. 'constant' (Dr. GRPO, TRL 'dr_grpo'): sum / (responses * max_length), "
        "no length bias.",
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


def _check_real(name: str, v: object, lo: float, hi: float, high_open: bool = False) -> None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise ValueError(f"{name} must be a number, got {v!r} ({type(v).__name__})")
    if not (lo <= v < hi if high_open else lo <= v <= hi):
        raise ValueError(f"{name} must be in [{lo}, {hi}{')' if high_open else ']'}, got {v!r}")


def _check_int(name: str, v: object, lo: int) -> None:
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        raise ValueError(f"{name} must be an integer >= {lo}, got {v!r}")


def _check_choice(name: str, v: object, choices: tuple) -> None:
    if isinstance(v, bool) or v not in choices or type(v) not in {type(c) for c in choices}:
        raise ValueError(
            f"{name}={v!r} is not valid; choose one of {', '.join(map(repr, choices))}"
        )


# Presets leave max_length None because L_max is a generation setting; set it for dr_grpo.
PRESETS: Mapping[str, Dial] = MappingProxyType(
    {
        "grpo": Dial(),
        "dr_grpo": Dial(std_power=0.0, length_norm="constant"),
        "dapo": Dial(silent="drop", length_norm="token", clip_high=0.28),
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


class GroupStats(NamedTuple):
    """Per-group reward statistics; groups numbered 0..M-1 in sorted order of their ids."""

    index: Tensor  # (N,) long: group number of each response
    size: Tensor  # (M,) long: G_g
    k: Tensor  # (M,) sum of rewards
    mean: Tensor  # (M,) k / G_g, exactly the common value when all rewards are equal
    sigma: Tensor  # (M,) std with the chosen ddof; exactly 0 when all rewards equal (incl. G=1)
    ids: Tensor  # (M,) the original group id of each group


def _float(rewards: Tensor) -> Tensor:
    return rewards if rewards.is_floating_point() else rewards.to(torch.get_default_dtype())


def group_stats(rewards: Tensor, group_ids: Tensor, ddof: int = 0) -> GroupStats:
    """k = sum r_i, mean = k/G, sigma = sqrt(sum_i (r_i - mean)^2 / max(G - ddof, 1)) per group."""
    _check_choice("ddof", ddof, (0, 1))
    if rewards.ndim != 1 or group_ids.shape != rewards.shape:
        raise ValueError(
            f"rewards and group_ids must be 1-D of equal length, got shapes "
            f"{tuple(rewards.shape)} and {tuple(group_ids.shape)}"
        )
    if group_ids.is_floating_point() or group_ids.is_complex() or group_ids.dtype == torch.bool:
        raise ValueError(f"group_ids must be an integer tensor, got {group_ids.dtype}")
    r = _float(rewards)  # (N,)
    if not torch.isfinite(r).all():
        raise ValueError("rewards contain NaN or inf")
    ids, index = torch.unique(group_ids, sorted=True, return_inverse=True)  # (M,), (N,)
    m = ids.numel()
    size = torch.zeros(m, dtype=torch.long, device=r.device).index_add_(
        0, index, torch.ones_like(index)
    )  # (M,)
    k = r.new_zeros(m).index_add_(0, index, r)  # (M,)
    lo = r.new_zeros(m).scatter_reduce_(0, index, r, "amin", include_self=False)  # (M,)
    hi = r.new_zeros(m).scatter_reduce_(0, index, r, "amax", include_self=False)  # (M,)
    # Decide "all equal" by comparison, not by a rounded k/G, so silent groups get exactly 0.
    flat = lo == hi  # (M,)
    mean = torch.where(flat, lo, k / size)  # (M,)
    dev = r - mean[index]  # (N,)
    ss = r.new_zeros(m).index_add_(0, index, dev * dev)  # (M,)
    sigma = (ss / (size - ddof).clamp(min=1)).sqrt()  # (M,) exactly 0 where flat: dev is 0
    return GroupStats(index, size, k, mean, sigma, ids)


def silent_groups(stats: GroupStats) -> Tensor:
    """(M,) bool: sigma_g = 0, i.e. all rewards in the group equal (k = 0 or G if binary)."""
    return stats.sigma == 0


def silent_mask(rewards: Tensor, group_ids: Tensor) -> Tensor:
    """(N,) bool: the response belongs to a silent group."""
    stats = group_stats(rewards, group_ids)
    return silent_groups(stats)[stats.index]


def _advantages(r: Tensor, stats: GroupStats, dial: Dial) -> Tensor:
    scale = (stats.sigma + dial.eps) ** dial.std_power  # (M,)
    # sigma + eps is 0 for silent groups at eps=0; group_stats makes their numerator exactly 0
    # (mean is the common value), so dividing by 1 gives the documented A = 0, not 0/0.
    scale = torch.where(scale > 0, scale, 1.0)  # (M,)
    return (r - stats.mean[stats.index]) / scale[stats.index]  # (N,)


def advantages(rewards: Tensor, group_ids: Tensor, dial: Dial) -> Tensor:
    """(N,) A_i = (r_i - mean_g) / (sigma_g + eps) ** std_power; 0 in silent/singleton groups."""
    stats = group_stats(rewards, group_ids, dial.std_ddof)
    return _advantages(_float(rewards), stats, dial)


def keep_mask(rewards: Tensor, group_ids: Tensor, dial: Dial) -> Tensor:
    """(N,) bool: responses to train on. 'keep' keeps all; 'drop' removes silent groups (DAPO)."""
    if dial.silent == "keep":
        return torch.ones(rewards.shape, dtype=torch.bool, device=rewards.device)
    return ~silent_mask(rewards, group_ids)


SMALL_SCORES = 2**22  # scores up to this many elements take index_add (a temporary that size)


def update_weights(rewards: Tensor, group_ids: Tensor, dial: Dial) -> Tensor:
    """(N,) A_i / G_g: response i's weight in its group's update (1/G_g) sum_{i in g} A_i s_i."""
    stats = group_stats(rewards, group_ids, dial.std_ddof)
    return _advantages(_float(rewards), stats, dial) / stats.size[stats.index]  # (N,)


def group_update(scores: Tensor, rewards: Tensor, group_ids: Tensor, dial: Dial) -> Tensor:
    """(M, D) per-group update (1/G_g) sum_{i in g} A_i s_i; equals sigma^(2-alpha) (s+ - s-).

    A sum of w_i s_i per group, w_i = A_i / G_g; for large scores (a real policy's gradients)
    one sparse (M, N) @ (N, D) product instead, so no (N, D) temporary of w_i s_i is made."""
    if scores.ndim != 2 or scores.shape[0] != rewards.shape[0]:
        raise ValueError(
            f"scores must be (N, D) with N = len(rewards) = {rewards.shape[0]}, "
            f"got {tuple(scores.shape)}"
        )
    stats = group_stats(rewards, group_ids, dial.std_ddof)
    w = (_advantages(_float(rewards), stats, dial) / stats.size[stats.index]).to(scores)  # (N,)
    m, n = stats.size.numel(), scores.shape[0]
    index = stats.index.to(scores.device)  # (N,)
    if scores.numel() <= SMALL_SCORES:  # the (N, D) temporary is cheap and index_add faster
        return scores.new_zeros(m, scores.shape[1]).index_add_(0, index, w[:, None] * scores)
    at = torch.stack([index, torch.arange(n, device=scores.device)])  # (2, N)
    spread = torch.sparse_coo_tensor(at, w, (m, n), check_invariants=False)  # (M, N)
    return torch.sparse.mm(spread, scores)  # (M, D)


def sequence_weights(mask: Tensor) -> Tensor:
    """(B, T) m_it / (B max(|o_i|, 1)): GRPO's per-sequence mean as token weights."""
    keep = mask.bool().double()  # (B, T); float64: exact normalizers for any loss dtype
    lengths = keep.sum(-1, keepdim=True).clamp(min=1)  # (B, 1)
    return keep / (lengths * max(keep.shape[0], 1))


def token_weights(mask: Tensor) -> Tensor:
    """(B, T) m_it / max(sum_it m_it, 1): DAPO's token mean as token weights."""
    keep = mask.bool().double()  # (B, T)
    return keep / keep.sum().clamp(min=1)


def constant_weights(mask: Tensor, max_length: int | None = None) -> Tensor:
    """(B, T) m_it / (B L_max), L_max = max_length or the padded width T: Dr. GRPO."""
    keep = mask.bool().double()  # (B, T)
    b, t = keep.shape
    return keep / max(b * (t if max_length is None else max_length), 1)


def weighted_sum(token_loss: Tensor, weights: Tensor) -> Tensor:
    """sum_it w_it l_it over w != 0 (padding may hold inf/NaN, and NaN * 0 is NaN)."""
    _check_mask(token_loss, weights)
    w = weights.to(token_loss.dtype)  # (B, T)
    return torch.where(weights != 0, token_loss * w, 0.0).sum()


def _check_mask(token_loss: Tensor, mask: Tensor) -> None:
    if token_loss.ndim != 2 or mask.shape != token_loss.shape:
        raise ValueError(
            f"token_loss and mask must be (B, T) of equal shape, got "
            f"{tuple(token_loss.shape)} and {tuple(mask.shape)}"
        )


def sequence_mean(token_loss: Tensor, mask: Tensor) -> Tensor:
    """(1/B) sum_i sum_t m_it l_it / max(|o_i|, 1): GRPO, TRL loss_type='grpo'."""
    _check_mask(token_loss, mask)
    return weighted_sum(token_loss, sequence_weights(mask))


def token_mean(token_loss: Tensor, mask: Tensor) -> Tensor:
    """sum_it m_it l_it / max(sum_it m_it, 1): DAPO, TRL loss_type='dapo'/'bnpo'."""
    _check_mask(token_loss, mask)
    return weighted_sum(token_loss, token_weights(mask))


def constant_normalizer(token_loss: Tensor, mask: Tensor, max_length: int | None = None) -> Tensor:
    """sum_it m_it l_it / (B * L_max), L_max = max_length or the padded width T: Dr. GRPO."""
    _check_mask(token_loss, mask)
    return weighted_sum(token_loss, constant_weights(mask, max_length))


Aggregator = Callable[[Tensor, Tensor], Tensor]
TokenWeights = Callable[[Tensor], Tensor]

# length_norm -> builder of the mask (B, T) -> weights (B, T) map; keys = LENGTH_NORM_CHOICES.
_WEIGHTS: Mapping[str, Callable[[Dial], TokenWeights]] = MappingProxyType(
    {
        "sequence": lambda dial: sequence_weights,
        "token": lambda dial: token_weights,
        "constant": lambda dial: partial(constant_weights, max_length=dial.max_length),
    }
)


def make_token_weights(dial: Dial) -> TokenWeights:
    """The dial's mask (B, T) -> token weights (B, T) whose weighted sum is its aggregation,
    chosen once per run; compute them on the whole batch, then sum any split of its rows."""
    return _WEIGHTS[dial.length_norm](dial)


def make_aggregator(dial: Dial) -> Aggregator:
    """The dial's (token_loss (B,T), mask (B,T)) -> scalar reduction, chosen once per run."""
    weights = make_token_weights(dial)

    def aggregator(token_loss: Tensor, mask: Tensor) -> Tensor:
        _check_mask(token_loss, mask)
        return weighted_sum(token_loss, weights(mask))

    return aggregator


def aggregate(token_loss: Tensor, mask: Tensor, dial: Dial) -> Tensor:
    """make_aggregator(dial)(token_loss, mask); build the aggregator once in a loop instead."""
    return make_aggregator(dial)(token_loss, mask)


def clipped_surrogate(logp: Tensor, old_logp: Tensor, adv: Tensor, dial: Dial) -> Tensor:
    """(B, T) -min(rho A, clip(rho, 1 - clip_low, 1 + clip_high) A), rho = exp(logp - old_logp)."""
    if logp.ndim != 2 or old_logp.shape != logp.shape or adv.shape != logp.shape[:1]:
        raise ValueError(
            f"need logp, old_logp (B, T) and adv (B,), got {tuple(logp.shape)}, "
            f"{tuple(old_logp.shape)}, {tuple(adv.shape)}"
        )
    ratio = torch.exp(logp - old_logp)  # (B, T)
    a = adv.to(ratio.dtype)[:, None]  # (B, 1)
    clipped = ratio.clamp(1.0 - dial.clip_low, 1.0 + dial.clip_high)  # (B, T)
    return -torch.minimum(ratio * a, clipped * a)  # (B, T)


def policy_loss(logp: Tensor, old_logp: Tensor, adv: Tensor, mask: Tensor, dial: Dial) -> Tensor:
    """Scalar loss: the dial's aggregation of the clipped surrogate over unmasked tokens."""
    return make_aggregator(dial)(clipped_surrogate(logp, old_logp, adv, dial), mask)


def weighted_policy_loss(
    logp: Tensor, old_logp: Tensor, adv: Tensor, weights: Tensor, dial: Dial
) -> Tensor:
    """sum_it w_it l_it of the clipped surrogate, weights from `make_token_weights` of the
    whole batch (sliced to these rows): summed over a split of the batch's rows it is
    policy_loss of the batch."""
    return weighted_sum(clipped_surrogate(logp, old_logp, adv, dial), weights)
