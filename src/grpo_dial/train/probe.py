"""The group-std identity measured on the real policy, for a few groups of a batch.

For a group of G responses with binary rewards, 0 < k < G, score vectors over ALL trainable
parameters (flattened) s_i = grad_theta sum_t log pi(o_it | x, o_i,<t) and advantages A_i from
advantage.advantages:

(a) sequence level. lhs = (1/G) sum_i A_i s_i (advantage.group_update). With population sigma_p,
    the dial's std sigma_d (ddof) and eps, the exact relation is
        lhs = c (s+ - s-),   c = sigma_p^2 / (sigma_d + eps)^alpha,
    i.e. sigma^(2-alpha) (s+ - s-) at ddof 0 and eps 0 (GRPO sigma, Dr. GRPO sigma^2); ddof 1
    gives c = sigma_p^2 / sigma_s^alpha with sigma_s = sigma_p sqrt(G/(G-1)), smaller by
    sqrt((G-1)/G)^alpha. The residual ||lhs - c (s+ - s-)|| / ||c (s+ - s-)|| is what the real
    gradients leave of the algebra (float64 sums of float32 gradients: ~1e-7).
(b) token level. g_agg = -grad of advantage.policy_loss at ratio 1 on the group alone, i.e. the
    direction the dial's aggregation really takes:
        sequence: (1/G) sum_i A_i s_i / |o_i|   token: sum_i A_i s_i / sum_i |o_i|
        constant: (1/(G L_max)) sum_i A_i s_i.
    token_cosine = cos(g_agg, lhs) (1 for token and constant, below 1 for sequence when lengths
    differ: the 1/|o_i| length bias) and token_norm_ratio = ||g_agg|| / ||lhs|| (the
    normalizer's scale: G / sum |o_i| for token, 1 / L_max for constant).

Lengths in this table are in tokens (what the aggregation divides by). Memory: the probe needs
G + 1 backward passes per group through one forward of the group, and it accumulates the two
sums it needs, lhs = sum_i (A_i / G) s_i and c (s+ - s-) = sum_i gamma_i s_i, gamma_i = c / k
(correct) or -c / (G - k), in float64 per parameter as each s_i arrives (`score_sums`): its
peak is the group's autograd graph plus ~20 B per parameter (two float64 sums and one float32
gradient), not G float64 copies of the gradient (tests/train/test_probe.py checks the peak;
docs/performance.md gives SmolLM2-135M's).
"""

from __future__ import annotations

import pandas as pd
import torch
from torch import Tensor

from grpo_dial.core.advantage import (
    advantages,
    group_stats,
    policy_loss,
    silent_groups,
    update_weights,
)
from grpo_dial.core.dial import Dial, group_estimator
from grpo_dial.core.std_factor import std_factor
from grpo_dial.policy.rollout import Rollouts, response_logprobs

IDENTITY_COLUMNS = (
    "step group prompt_id k G sigma factor seq_relative_residual token_cosine token_norm_ratio "
    "length_norm mean_len_correct mean_len_incorrect"
).split()


def _flat_grad(output: Tensor, params: list[Tensor], retain: bool) -> Tensor:
    grads = torch.autograd.grad(output, params, retain_graph=retain, allow_unused=True)
    return torch.cat(
        [
            (torch.zeros_like(p) if g is None else g).reshape(-1)
            for g, p in zip(grads, params, strict=True)
        ]
    ).double()  # (D,)


def response_scores(model: torch.nn.Module, rollouts: Rollouts) -> tuple[Tensor, Tensor]:
    """(scores (N, D) float64, logp (N, T) still attached): s_i = grad sum_t log pi(o_it),
    one backward per response through a shared forward. N float64 copies of the parameters:
    for small models and tests; the probe itself accumulates (`score_sums`)."""
    params = [p for p in model.parameters() if p.requires_grad]
    with torch.enable_grad():
        logp = response_logprobs(model, rollouts)  # (N, T)
        seq = logp.sum(-1)  # (N,)
        scores = torch.stack([_flat_grad(seq[i], params, retain=True) for i in range(len(seq))])
    return scores, logp  # (N, D), (N, T)


def score_sums(model: torch.nn.Module, rollouts: Rollouts, weights: Tensor):
    """(sums, logp (N, T) still attached): sums[c] = sum_i weights[c, i] s_i per trainable
    parameter, float64, for the rows c of weights (C, N); one backward per response through a
    shared forward, each s_i added to the sums and dropped (C copies of the parameters, not N)."""
    params = [p for p in model.parameters() if p.requires_grad]
    sums = [[torch.zeros_like(p, dtype=torch.float64) for p in params] for _ in weights]
    with torch.enable_grad():
        logp = response_logprobs(model, rollouts)  # (N, T)
        seq = logp.sum(-1)  # (N,)
        for i in range(len(seq)):
            grads = torch.autograd.grad(seq[i], params, retain_graph=True, allow_unused=True)
            for c, total in enumerate(sums):
                for acc, g in zip(total, grads, strict=True):
                    if g is not None:
                        acc.add_(g.double(), alpha=float(weights[c, i]))
    return sums, logp


def probe_group(model: torch.nn.Module, group: Rollouts, rewards: Tensor, dial: Dial) -> dict:
    """The identity's numbers for ONE informative group with binary rewards (see module doc).
    The identity is the group estimator's: a dial's registered advantage estimators (strata,
    anchor: they reweight single advantages, so c (s+ - s-) is no longer the update's form) are
    left out, and lambda-GRPO's weights enter the token level at lambda_value (a learnable
    lambda's start)."""
    dial = group_estimator(dial)
    r = rewards.to(torch.float64)  # (G,)
    if not bool(((r == 0) | (r == 1)).all()):
        raise ValueError("the identity probe needs binary rewards (0 or 1)")
    gid = torch.zeros(len(group), dtype=torch.long, device=r.device)  # (G,)
    pop = group_stats(r, gid, ddof=0)
    if bool(silent_groups(pop)[0]):
        raise ValueError("the identity probe needs an informative group (0 < k < G)")
    sigma_p, k, g = pop.sigma[0], pop.k[0], len(r)
    sigma_d = group_stats(r, gid, ddof=dial.std_ddof).sigma[0]
    factor = sigma_p**2 / std_factor(sigma_d, dial.eps, dial.std_power)
    correct = r == 1  # (G,)
    gamma = torch.where(correct, factor / k, -factor / (g - k))  # (G,) c (s+ - s-) weights
    weights = torch.stack([update_weights(r, gid, dial), gamma])  # (2, G)
    (lhs, rhs), logp = score_sums(model, group, weights)
    params = [p for p in model.parameters() if p.requires_grad]
    with torch.enable_grad():
        adv = advantages(r, gid, dial).to(logp.device, logp.dtype)  # (G,)
        loss = policy_loss(logp, logp.detach(), adv, group.response_mask, dial)
        grads = torch.autograd.grad(loss, params, allow_unused=True)
    sq = {"lhs": 0.0, "rhs": 0.0, "diff": 0.0, "agg": 0.0, "dot": 0.0}
    for gr, left, right in zip(grads, lhs, rhs, strict=True):  # one parameter at a time
        agg = torch.zeros_like(left) if gr is None else -gr.double()  # g_agg = -grad loss
        sq["lhs"] += float(left.pow(2).sum())
        sq["rhs"] += float(right.pow(2).sum())
        sq["diff"] += float((left - right).pow(2).sum())
        sq["agg"] += float(agg.pow(2).sum())
        sq["dot"] += float((agg * left).sum())
    lengths = group.response_lengths.double().cpu()  # (G,)
    c = correct.cpu()
    return {
        "prompt_id": group.problems[0].prompt_id,
        "k": int(k),
        "G": g,
        "sigma": float(sigma_p),
        "factor": float(factor),
        "seq_relative_residual": (sq["diff"] / sq["rhs"]) ** 0.5,
        "token_cosine": sq["dot"] / (sq["agg"] * sq["lhs"]) ** 0.5,
        "token_norm_ratio": (sq["agg"] / sq["lhs"]) ** 0.5,
        "length_norm": dial.length_norm,
        "mean_len_correct": float(lengths[c].mean()),
        "mean_len_incorrect": float(lengths[~c].mean()),
    }


def identity_probe(
    model: torch.nn.Module,
    rollouts: Rollouts,
    rewards: Tensor,
    dial: Dial,
    n_groups: int,
    step: int,
) -> pd.DataFrame:
    """IDENTITY_COLUMNS rows for the first `n_groups` informative groups of `rollouts` (group
    order), measured on the model as it is (call before the update: the identity is on-policy)."""
    if len(rewards) != len(rollouts):
        raise ValueError(f"{len(rewards)} rewards for {len(rollouts)} responses")
    rewards, group_ids = rewards.cpu(), rollouts.group_ids.cpu()  # (N,), (N,)
    stats = group_stats(rewards, group_ids)
    informative = stats.ids[~silent_groups(stats)][:n_groups].tolist()
    rows = []
    for g in informative:
        rows_g = (group_ids == g).nonzero().squeeze(1)  # (G,)
        row = probe_group(model, rollouts.select(rows_g), rewards[rows_g], dial)
        rows.append({"step": step, "group": int(g), **row})
    return pd.DataFrame(rows, columns=IDENTITY_COLUMNS)
