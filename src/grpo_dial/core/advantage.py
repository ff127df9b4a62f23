"""Group-relative advantages, PPO clipped surrogate and token-loss aggregation, set by one dial.

For a group g of G responses with rewards r_i (any reals; {0,1} from a verifier), k = sum_i r_i,
mean_g = k/G and std sigma_g with ddof d (d=0: population, d=1: sample),

    A_i = (r_i - mean_g) / (sigma_g + eps) ** alpha                      alpha = std_power in [0, 1]

alpha=1 is GRPO/DAPO, alpha=0 is Dr. GRPO (A_i = r_i - mean_g). A group whose rewards are all
equal (sigma_g = 0, "silent"; every singleton group is one) gets A_i = 0 exactly, even for eps = 0.
That is the default of two slots, A_i = (r_i - b_i) / s_i: a registered estimator may own the
baseline b (RLOO's leave-one-out, OPO's length-weighted, pass@k's, none) or the scale s (the
batch's std), one owner per slot (core.registry). Then the transforms act on A in registration
order (`advantages`), e.g. Stratified GRPO's A <- beta A^(s) + (1 - beta) A, A^(s) the same
slots within the response's stratum of its group (arXiv 2510.06214), and HA-DW's A <- Phi A,
Phi = s exp(-sgn(r - mean_g)(p_hat_g - C)) for a difficulty anchor C (arXiv 2601.08521).

Per-token PPO loss with ratio rho = exp(logp - old_logp):
    l_it = -min(rho_it A_i, clip(rho_it, 1 - clip_low, 1 + clip_high) A_i),
reduced over B responses with 0/1 mask m_it and lengths |o_i| = sum_t m_it in one of three ways:
    sequence (GRPO):     (1/B) sum_i (1/max(|o_i|, 1)) sum_t m_it l_it
    token (DAPO):        sum_it m_it l_it / max(sum_it m_it, 1)
    constant (Dr. GRPO): sum_it m_it l_it / (B * L_max)
These are TRL's loss_type "grpo", "dapo" and "dr_grpo"; the registered estimators add
'sequence_sum' (TRL 'luspo', verl seq-mean-token-sum), 'sum' (verl token-sum), 'bnpo' (TRL's
token mean per micro-batch) and 'lambda', lambda-GRPO's length-weighted token mean (all in
core.token_weights). Empty responses count in B (empty_rows 'skip': verl's, they do not).
With ratio_level 'sequence' (GSPO) rho_it is the response's s_i = exp(mean_t log-ratio).
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

from collections.abc import Callable
from functools import partial
from typing import NamedTuple

import torch
from torch import Tensor

from grpo_dial.core.checks import check_choice
from grpo_dial.core.dial import Dial
from grpo_dial.core.estimators import DEFAULT_SLOTS, ESTIMATORS, active_estimators, slot_owner
from grpo_dial.core.token_weights import (
    _check_mask,
    constant_weights,
    sequence_weights,
    token_weights,
    weighted_sum,
)


class GroupStats(NamedTuple):
    """Per-group reward statistics; groups numbered 0..M-1 in sorted order of their ids."""

    index: Tensor  # (N,) long: group number of each response
    size: Tensor  # (M,) long: G_g
    k: Tensor  # (M,) sum of rewards
    mean: Tensor  # (M,) k / G_g, exactly the common value when all rewards are equal
    sigma: Tensor  # (M,) std with the chosen ddof; exactly 0 when all rewards equal (incl. G=1)
    ids: Tensor  # (M,) the original group id of each group
    rewards: Tensor  # (N,) the rewards as floats (what an estimator recomputes A from)


def _float(rewards: Tensor) -> Tensor:
    return rewards if rewards.is_floating_point() else rewards.to(torch.get_default_dtype())


def group_stats(rewards: Tensor, group_ids: Tensor, ddof: int = 0) -> GroupStats:
    """k = sum r_i, mean = k/G, sigma = sqrt(sum_i (r_i - mean)^2 / max(G - ddof, 1)) per group."""
    check_choice("ddof", ddof, (0, 1))
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
    return GroupStats(index, size, k, mean, sigma, ids, r)


def silent_groups(stats: GroupStats) -> Tensor:
    """(M,) bool: sigma_g = 0, i.e. all rewards in the group equal (k = 0 or G if binary)."""
    return stats.sigma == 0


def silent_mask(rewards: Tensor, group_ids: Tensor) -> Tensor:
    """(N,) bool: the response belongs to a silent group."""
    stats = group_stats(rewards, group_ids)
    return silent_groups(stats)[stats.index]


def _slot(dial: Dial, slot: str, stats: GroupStats, context: dict) -> Tensor:
    """(N,) the slot's value: its owner's function on what it needs, else the default."""
    owner = slot_owner(dial, slot)
    if owner is None:
        return DEFAULT_SLOTS[slot](stats, dial)
    return owner.function(stats, dial, **{key: context.get(key) for key in owner.needs})


def _composed(stats: GroupStats, dial: Dial, context: dict) -> Tensor:
    """(N,) (r_i - b_i) / s_i: the baseline slot's centred reward over the scale slot's s_i.
    The default s is 1 where (sigma + eps)^alpha is 0 (a silent group at eps = 0), whose
    centred reward group_stats makes exactly 0, so A = 0 there, not 0/0."""
    return _slot(dial, "baseline", stats, context) / _slot(dial, "scale", stats, context)


def advantages(
    rewards: Tensor,
    group_ids: Tensor,
    dial: Dial,
    **context: Tensor | float | None,
) -> Tensor:
    """(N,) the dial's advantage of every response, in this order:

        A_i = (r_i - b_i) / s_i                                               (the two slots)

    b_i the baseline slot's (default mean_g; the leave-one-out, length-weighted, pass@k or no
    baseline), s_i the scale slot's (default (sigma_g + eps) ** std_power; the batch's std);
    with the defaults A is 0 in silent and singleton groups. Then each registered 'advantage'
    transform the dial uses (core.estimators, in registration order): GPG's B/M, the
    whitening over responses or tokens, then
        A_i <- beta A_i^(s) + (1 - beta) A_i, A^(s) the slots within i's stratum  (dial.strata)
        A_i <- Phi_i A_i, Phi_i = s exp(-sgn(r_i - mean_g)(p_hat_g - C_g))        (dial.anchor)

    context: what those estimators need (`Estimator.needs`): lengths, (N,) tokens of each
    response (the length-weighted baseline, whitening over tokens); strata, (N,) integer
    stratum of each response; anchor, the difficulty anchor C, a float or (M,) per group (groups in
    sorted order of their ids); p_hat_g = mean_g, the group's accuracy."""
    valid = {need for e in ESTIMATORS.values() for need in e.needs}  # what any may need
    unknown = sorted(set(context) - valid)
    if unknown:
        raise ValueError(
            f"unknown advantage context {unknown[0]!r}; valid: {', '.join(sorted(valid))}"
        )
    stats = group_stats(rewards, group_ids, dial.std_ddof)
    r = _float(rewards)  # (N,)
    adv = _composed(stats, dial, context)  # (N,)

    def regroup(cell: Tensor) -> Tensor:  # the dial's slots over a finer grouping of the batch
        return _composed(group_stats(r, cell, dial.std_ddof), dial, context)

    for estimator in active_estimators(dial, "advantage"):  # registration order
        needs = {key: context.get(key) for key in estimator.needs}
        adv = estimator.function(adv, stats, dial, regroup, **needs)
    return adv


def keep_mask(rewards: Tensor, group_ids: Tensor, dial: Dial) -> Tensor:
    """(N,) bool: responses to train on. 'keep' keeps all; 'drop' removes silent groups (DAPO)."""
    if dial.silent == "keep":
        return torch.ones(rewards.shape, dtype=torch.bool, device=rewards.device)
    return ~silent_mask(rewards, group_ids)


SMALL_SCORES = 2**22  # scores up to this many elements take index_add (a temporary that size)


def update_weights(
    rewards: Tensor, group_ids: Tensor, dial: Dial, **context: Tensor | float | None
) -> Tensor:
    """(N,) A_i / G_g: response i's weight in its group's update (1/G_g) sum_{i in g} A_i s_i;
    `context`: the strata / anchor `advantages` takes."""
    stats = group_stats(rewards, group_ids, dial.std_ddof)
    return advantages(rewards, group_ids, dial, **context) / stats.size[stats.index]  # (N,)


def group_update(
    scores: Tensor, rewards: Tensor, group_ids: Tensor, dial: Dial, **context: Tensor | float | None
) -> Tensor:
    """(M, D) per-group update (1/G_g) sum_{i in g} A_i s_i; equals sigma^(2-alpha) (s+ - s-)
    for the group estimator (no strata, no anchor).

    A sum of w_i s_i per group, w_i = A_i / G_g; for large scores (a real policy's gradients)
    one sparse (M, N) @ (N, D) product instead, so no (N, D) temporary of w_i s_i is made."""
    if scores.ndim != 2 or scores.shape[0] != rewards.shape[0]:
        raise ValueError(
            f"scores must be (N, D) with N = len(rewards) = {rewards.shape[0]}, "
            f"got {tuple(scores.shape)}"
        )
    stats = group_stats(rewards, group_ids, dial.std_ddof)
    w = update_weights(rewards, group_ids, dial, **context).to(scores)  # (N,)
    m, n = stats.size.numel(), scores.shape[0]
    index = stats.index.to(scores.device)  # (N,)
    if scores.numel() <= SMALL_SCORES:  # the (N, D) temporary is cheap and index_add faster
        return scores.new_zeros(m, scores.shape[1]).index_add_(0, index, w[:, None] * scores)
    at = torch.stack([index, torch.arange(n, device=scores.device)])  # (2, N)
    spread = torch.sparse_coo_tensor(at, w, (m, n), check_invariants=False)  # (M, N)
    return torch.sparse.mm(spread, scores)  # (M, D)


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


Aggregator = Callable[..., Tensor]  # (token_loss (B,T), mask (B,T), group_ids=None) -> scalar
TokenWeights = Callable[..., Tensor]  # (mask (B,T), group_ids=None, lam=None) -> (B, T)


def make_token_weights(dial: Dial) -> TokenWeights:
    """The dial's (mask (B, T), group_ids (B,) = None, lam = None) -> token weights (B, T) whose
    weighted sum is its aggregation, chosen once per run; compute them on the whole batch, then
    sum any split of its rows. Only lambda-GRPO reads group_ids and lam (None: lambda_value)."""
    norm = dial.length_norm
    weighted = active_estimators(dial, "weights")  # a registered normalizer (lambda-GRPO, ..)
    if weighted:  # each reads the whole dial, so the first active one is every active one's
        return weighted[0].function(dial)
    plain = {
        "sequence": sequence_weights,
        "token": token_weights,
        "constant": partial(constant_weights, max_length=dial.max_length),
    }[norm]
    return lambda mask, group_ids=None, lam=None: plain(mask)


def make_aggregator(dial: Dial) -> Aggregator:
    """The dial's (token_loss (B,T), mask (B,T), group_ids (B,) = None) -> scalar reduction,
    chosen once per run."""
    weights = make_token_weights(dial)

    def aggregator(token_loss: Tensor, mask: Tensor, group_ids: Tensor | None = None) -> Tensor:
        _check_mask(token_loss, mask)
        return weighted_sum(token_loss, weights(mask, group_ids))

    return aggregator


def aggregate(
    token_loss: Tensor, mask: Tensor, dial: Dial, group_ids: Tensor | None = None
) -> Tensor:
    """make_aggregator(dial)(token_loss, mask, group_ids); build the aggregator once instead."""
    return make_aggregator(dial)(token_loss, mask, group_ids)


def clipped_surrogate(
    logp: Tensor, old_logp: Tensor, adv: Tensor, dial: Dial, mask: Tensor | None = None
) -> Tensor:
    """(B, T) -min(rho A, clip(rho, 1 - clip_low, 1 + clip_high) A), rho = exp(logp - old_logp)
    per token, or with a registered ratio estimator (dial.ratio_level 'sequence', GSPO) its
    ratio, e.g. the sequence's s_i = exp(sum_t m_it (logp - old_logp)_it / |o_i|) on every
    token of row i (mask (B, T) says which tokens count; that ratio needs it)."""
    if logp.ndim != 2 or old_logp.shape != logp.shape or adv.shape != logp.shape[:1]:
        raise ValueError(
            f"need logp, old_logp (B, T) and adv (B,), got {tuple(logp.shape)}, "
            f"{tuple(old_logp.shape)}, {tuple(adv.shape)}"
        )
    log_ratio = logp - old_logp  # (B, T)
    for est in active_estimators(dial, "ratio"):  # at most one: ratio_level has one value
        log_ratio = est.function(dial)(log_ratio, mask)  # (B, T)
    ratio = torch.exp(log_ratio)  # (B, T)
    a = adv.to(ratio.dtype)[:, None]  # (B, 1)
    clipped = ratio.clamp(1.0 - dial.clip_low, 1.0 + dial.clip_high)  # (B, T)
    return -torch.minimum(ratio * a, clipped * a)  # (B, T)


def policy_loss(
    logp: Tensor,
    old_logp: Tensor,
    adv: Tensor,
    mask: Tensor,
    dial: Dial,
    group_ids: Tensor | None = None,
) -> Tensor:
    """Scalar loss: the dial's aggregation of the clipped surrogate over unmasked tokens."""
    surrogate = clipped_surrogate(logp, old_logp, adv, dial, mask)
    return make_aggregator(dial)(surrogate, mask, group_ids)


def row_sums(token_loss: Tensor, weights: Tensor) -> Tensor:
    """(B,) sum_t l_it over tokens with w != 0 (NaN-safe like weighted_sum): L_i of
    `lambda_objective`."""
    _check_mask(token_loss, weights)
    return torch.where(weights != 0, token_loss, 0.0).sum(-1)


def weighted_policy_loss(
    logp: Tensor, old_logp: Tensor, adv: Tensor, weights: Tensor, dial: Dial
) -> Tensor:
    """sum_it w_it l_it of the clipped surrogate, weights from `make_token_weights` of the
    whole batch (sliced to these rows): summed over a split of the batch's rows it is
    policy_loss of the batch."""
    return weighted_sum(clipped_surrogate(logp, old_logp, adv, dial, weights != 0), weights)
