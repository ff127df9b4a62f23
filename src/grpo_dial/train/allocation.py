"""How many responses each prompt of a batch gets: uniform G, or a fixed budget spent by the
closed forms (the adaptive group-size arm).

uniform:  G_j = G for every prompt.
adaptive: the batch's budget B = (prompts) x G is split by theory.allocate_budget, maximizing
    sum_j f(p_j, G_j) subject to sum_j G_j <= B and g_min <= G_j <= g_max, where p_j is the
    running pass-rate estimate (grpo_dial.passrates.tracker) and f the configured signal:
    "grpo" E[sigma](p, G), "dr_grpo" p(1-p)(1 - 1/G), "nonsilent" 1 - p^G - (1-p)^G.
    Prompts whose estimate is unanimous (p = 0 or 1 on all evidence so far) are, by `unanimous`,
    "skip"ped (G = 0, not sampled) or given the "minimum" g_min, reserved before the split so a
    prompt the policy starts to solve is noticed. When "skip" would leave the whole batch
    unsampled, the batch falls back to "minimum". The total never exceeds B; it falls short only
    when every funded prompt is at g_max.
"""

from __future__ import annotations

import numpy as np

from grpo_dial.core import theory

ALLOCATIONS = ("uniform", "adaptive")
UNANIMOUS = ("skip", "minimum")


def allocate_groups(
    estimate: np.ndarray,
    unanimous: np.ndarray,
    group_size: int,
    *,
    allocation: str = "uniform",
    signal: str = "grpo",
    g_min: int = 2,
    g_max: int = 32,
    unanimous_policy: str = "minimum",
) -> np.ndarray:
    """(M,) int64 responses per prompt for a batch of M prompts (budget M x group_size)."""
    if allocation not in ALLOCATIONS:
        raise ValueError(f"allocation={allocation!r} is not valid; choose one of {ALLOCATIONS}")
    if unanimous_policy not in UNANIMOUS:
        raise ValueError(f"unanimous={unanimous_policy!r} is not valid; choose one of {UNANIMOUS}")
    estimate = np.asarray(estimate, dtype=float)  # (M,)
    unanimous = np.asarray(unanimous, dtype=bool)  # (M,)
    if estimate.ndim != 1 or unanimous.shape != estimate.shape:
        raise ValueError("estimate and unanimous must be 1-D arrays of one length")
    if allocation == "uniform":
        return np.full(estimate.shape, int(group_size), np.int64)
    if not 1 <= g_min <= g_max:
        raise ValueError(f"need 1 <= g_min <= g_max, got g_min={g_min}, g_max={g_max}")
    budget = estimate.size * int(group_size)
    sizes = np.zeros(estimate.shape, np.int64)  # (M,)
    keep_minimum = unanimous_policy == "minimum" or bool(unanimous.all())
    reserved = unanimous.copy() if keep_minimum else np.zeros_like(unanimous)
    n_reserved = min(int(reserved.sum()), budget // g_min)
    reserved_idx = np.flatnonzero(reserved)[:n_reserved]
    sizes[reserved_idx] = g_min
    rest = np.flatnonzero(~unanimous)
    if rest.size:
        p = np.clip(estimate[rest], 1e-9, 1 - 1e-9)  # estimates are interior; guard the clip
        sizes[rest] = theory.allocate_budget(
            p, budget - g_min * n_reserved, signal, g_min=g_min, g_max=g_max,
            skip_unanimous=False,
        )
    return sizes
