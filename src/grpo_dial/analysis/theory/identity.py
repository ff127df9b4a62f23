"""Numerical checks of the group-standard-deviation identity through the project's advantage code.

For a group of G binary rewards with k correct, population sigma = sqrt(k(G-k))/G, score vectors
s_i and mean scores s+ (correct) and s- (incorrect), advantage.group_update computes
    (1/G) sum_i A_i s_i,    A_i = (r_i - k/G) / (sigma_d + eps)^alpha,
and the identity says this equals sigma^2 / sigma_d^alpha (s+ - s-) in any dimension, sigma_d
being the std the dial uses: sigma^(2 - alpha) (s+ - s-) for the population std (GRPO alpha=1,
Dr. GRPO alpha=0); sigma^2 / sigma_s (s+ - s-), sigma_s = sigma sqrt(G/(G-1)), for the sample std
(ddof=1). A silent group (k = 0 or G) gives 0 on both sides. eps = 0 throughout.

identity_curve: the one-parameter Bernoulli policy, score s_i = r_i - b at baseline b, so
s+ - s- = 1 and the GRPO update of every group is sigma(k, G), whatever b; groups drawn at p = b.
identity_residuals: random Gaussian score vectors, every k including the silent ones.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from grpo_dial.core.advantage import group_update
from grpo_dial.core.dial import Dial, preset
from grpo_dial.core.theory import group_sigma


def _exact(name: str, **overrides: object) -> Dial:
    # eps = 0: the identity is exact only without the eps regularizer.
    return preset(name).replace(eps=0.0, **overrides)


def _check_sizes(name: str, values: tuple, lo: int) -> tuple[int, ...]:
    vals = tuple(values)
    if not vals or any(isinstance(v, bool) or not isinstance(v, int | np.integer) for v in vals):
        raise ValueError(f"{name} must be a non-empty sequence of integers, got {values!r}")
    if min(vals) < lo:
        raise ValueError(f"{name} must all be >= {lo}, got {values!r}")
    return tuple(int(v) for v in vals)


def identity_curve(
    group_size: int = 8,
    baselines: tuple[float, ...] = (0.2, 0.5, 0.8),
    n_groups: int = 20000,
    seed: int = 0,
) -> pd.DataFrame:
    """Per (baseline b, k): mean over Monte-Carlo groups (rewards ~ Bernoulli(b)) of the GRPO update
    (1/G) sum_i A_i (r_i - b), beside sigma(k, G) = sqrt(k(G-k))/G.

    Columns: G, k, baseline, sigma_closed_form, mc_update, mc_se (std/sqrt(n)), n_groups_at_k.
    Every k = 0..G gets a row; a k never drawn has n_groups_at_k 0 and mc_update, mc_se NaN.
    """
    (g,) = _check_sizes("group_size", (group_size,), 1)
    (n,) = _check_sizes("n_groups", (n_groups,), 1)
    bs = np.asarray(baselines, dtype=float)
    if bs.ndim != 1 or bs.size == 0 or not np.all((bs > 0) & (bs < 1)):
        raise ValueError(f"baselines must be a non-empty sequence in (0, 1), got {baselines!r}")
    dial = _exact("grpo", std_ddof=0)
    rng = np.random.default_rng(seed)
    ids = torch.arange(n).repeat_interleave(g)  # (N,)
    ks = np.arange(g + 1)  # (G+1,)
    frames = []
    for b in bs:
        r = rng.random((n, g)) < b  # (n, G)
        k = r.sum(axis=1)  # (n,)
        rewards = torch.from_numpy(r.reshape(-1).astype(np.float64))  # (N,)
        scores = torch.from_numpy((r - b).reshape(-1, 1))  # (N, 1)
        upd = group_update(scores, rewards, ids, dial)[:, 0].numpy()  # (n,)
        count = np.bincount(k, minlength=g + 1)  # (G+1,)
        total = np.bincount(k, weights=upd, minlength=g + 1)  # (G+1,)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = total / count  # (G+1,)
            dev = upd - mean[k]  # (n,) two-pass, so equal updates give se exactly 0
            var = np.bincount(k, weights=dev * dev, minlength=g + 1) / np.maximum(count - 1, 1)
            se = np.sqrt(var / count)  # (G+1,)
        frames.append(
            pd.DataFrame(
                {
                    "G": g,
                    "k": ks,
                    "baseline": float(b),
                    "sigma_closed_form": group_sigma(ks, g),
                    "mc_update": mean,
                    "mc_se": se,
                    "n_groups_at_k": count,
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def _groups_with_k(rng: np.random.Generator, ks: np.ndarray, g: int) -> np.ndarray:
    """(K, G) bool: row i has exactly ks[i] True at uniformly random positions."""
    rank = np.argsort(rng.random((ks.size, g)), axis=1)  # (K, G) a random permutation per row
    return rank < ks[:, None]


def identity_residuals(
    dims: tuple[int, ...] = (3, 16),
    group_sizes: tuple[int, ...] = (2, 4, 8, 16),
    n_trials: int = 200,
    seed: int = 0,
) -> pd.DataFrame:
    """max over trials and coordinates of |group_update - closed form|, random N(0,1) score vectors.

    Closed forms (sigma = sqrt(k(G-k))/G, sigma_s = sigma sqrt(G/(G-1))): grpo sigma (s+ - s-),
    dr_grpo sigma^2 (s+ - s-), sample_std sigma^2 / sigma_s (s+ - s-); 0 for k in {0, G}.
    Columns: recipe, G, k, dim, max_abs_residual, relative_residual (over max |closed form|; 0 when
    both sides are 0).
    """
    dims = _check_sizes("dims", dims, 1)
    group_sizes = _check_sizes("group_sizes", group_sizes, 2)
    (n,) = _check_sizes("n_trials", (n_trials,), 1)
    recipes = {
        "grpo": (_exact("grpo", std_ddof=0), lambda s, g: s),
        "dr_grpo": (_exact("dr_grpo", std_ddof=0), lambda s, g: s * s),
        "sample_std": (_exact("grpo", std_ddof=1), lambda s, g: s * np.sqrt((g - 1) / g)),
    }
    rng = np.random.default_rng(seed)
    rows = []
    for g in group_sizes:
        ks = np.repeat(np.arange(g + 1), n)  # (K,) every k = 0..G, n trials each
        ids = torch.arange(ks.size).repeat_interleave(g)  # (K*G,)
        for dim in dims:
            correct = _groups_with_k(rng, ks, g)  # (K, G)
            s = rng.standard_normal((ks.size, g, dim))  # (K, G, D)
            c = correct[..., None]  # (K, G, 1)
            s_plus = (s * c).sum(axis=1) / np.maximum(ks, 1)[:, None]  # (K, D)
            s_minus = (s * ~c).sum(axis=1) / np.maximum(g - ks, 1)[:, None]  # (K, D)
            sigma = group_sigma(ks, g)[:, None]  # (K, 1); 0 for silent groups
            rewards = torch.from_numpy(correct.reshape(-1).astype(np.float64))  # (K*G,)
            scores = torch.from_numpy(s.reshape(-1, dim))  # (K*G, D)
            for recipe, (dial, factor) in recipes.items():
                lhs = group_update(scores, rewards, ids, dial).numpy()  # (K, D)
                rhs = factor(sigma, g) * (s_plus - s_minus)  # (K, D)
                err = np.abs(lhs - rhs).max(axis=1).reshape(g + 1, n).max(axis=1)  # (G+1,)
                scale = np.abs(rhs).max(axis=1).reshape(g + 1, n).max(axis=1)  # (G+1,)
                with np.errstate(divide="ignore", invalid="ignore"):
                    rel = np.where(err == 0, 0.0, err / scale)  # (G+1,); inf if rhs is all 0
                rows.append(
                    pd.DataFrame(
                        {
                            "recipe": recipe,
                            "G": g,
                            "k": np.arange(g + 1),
                            "dim": dim,
                            "max_abs_residual": err,
                            "relative_residual": rel,
                        }
                    )
                )
    return pd.concat(rows, ignore_index=True)
