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

Lengths in this table are in tokens (what the aggregation divides by). The probe needs G + 1
backward passes per group and G flattened gradients in memory: meant for small policies.
"""

from __future__ import annotations

import pandas as pd
import torch
from torch import Tensor

from grpo_dial.core.advantage import (
    Dial,
    advantages,
    group_stats,
    group_update,
    policy_loss,
    silent_groups,
)
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
    one backward per response through a shared forward."""
    params = [p for p in model.parameters() if p.requires_grad]
    with torch.enable_grad():
        logp = response_logprobs(model, rollouts)  # (N, T)
        seq = logp.sum(-1)  # (N,)
        scores = torch.stack([_flat_grad(seq[i], params, retain=True) for i in range(len(seq))])
    return scores, logp  # (N, D), (N, T)


def probe_group(model: torch.nn.Module, group: Rollouts, rewards: Tensor, dial: Dial) -> dict:
    """The identity's numbers for ONE informative group with binary rewards (see module doc)."""
    r = rewards.to(torch.float64)  # (G,)
    if not bool(((r == 0) | (r == 1)).all()):
        raise ValueError("the identity probe needs binary rewards (0 or 1)")
    gid = torch.zeros(len(group), dtype=torch.long, device=r.device)  # (G,)
    pop = group_stats(r, gid, ddof=0)
    if bool(silent_groups(pop)[0]):
        raise ValueError("the identity probe needs an informative group (0 < k < G)")
    scores, logp = response_scores(model, group)  # (G, D), (G, T)
    params = [p for p in model.parameters() if p.requires_grad]
    with torch.enable_grad():
        adv = advantages(r, gid, dial).to(logp.device, logp.dtype)  # (G,)
        loss = policy_loss(logp, logp.detach(), adv, group.response_mask, dial)
        g_agg = -_flat_grad(loss, params, retain=False)  # (D,)

    lhs = group_update(scores, r.to(scores.device), gid.to(scores.device), dial)[0]  # (D,)
    sigma_p = pop.sigma[0]
    sigma_d = group_stats(r, gid, ddof=dial.std_ddof).sigma[0]
    factor = sigma_p**2 / (sigma_d + dial.eps) ** dial.std_power
    correct = (r == 1).to(scores.device)  # (G,)
    rhs = factor.to(scores.device) * (scores[correct].mean(0) - scores[~correct].mean(0))  # (D,)
    lhs_norm = lhs.norm()
    lengths = group.response_lengths.double().cpu()  # (G,)
    c = correct.cpu()
    return {
        "prompt_id": group.problems[0].prompt_id,
        "k": int(pop.k[0]),
        "G": len(group),
        "sigma": float(sigma_p),
        "factor": float(factor),
        "seq_relative_residual": float((lhs - rhs).norm() / rhs.norm()),
        "token_cosine": float(g_agg @ lhs / (g_agg.norm() * lhs_norm)),
        "token_norm_ratio": float(g_agg.norm() / lhs_norm),
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
