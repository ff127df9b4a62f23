"""Tidy tables (one row per observation) of the closed forms in `theory` and `group_bias`, for
figures and report.

Pure functions: inputs are grids of pass rates p, group sizes G and targets; every closed-form
number comes from `grpo_dial.core.theory` or `grpo_dial.core.group_bias`. The one simulation here,
seeded, is group_bias_table's Monte Carlo check columns, so that the table shows its own check.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from grpo_dial.core import group_bias, theory


def _grid(a: Sequence[float], b: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """Cartesian product, a varying slowest: rows (a0,b0), (a0,b1), ...; dtypes kept."""
    a, b = np.asarray(a).ravel(), np.asarray(b).ravel()
    return np.repeat(a, b.size), np.tile(b, a.size)


def group_size_table(
    ps: Sequence[float] = (0.5, 0.3, 0.1, 0.05),
    fidelities: Sequence[float] = (0.90, 0.95, 0.99),
) -> pd.DataFrame:
    """Group size needed for fidelity phi >= 1 - eps, per (p, fidelity).

    Columns: p, fidelity, eps = 1 - fidelity, g_exact (smallest G with phi(p, G) >= fidelity, -1 if
    none up to 100,000), g_closed_form = 1/(8 eps p(1-p)) and its roundings g_closed_form_nearest
    (what the paper's table prints in parentheses) and g_closed_form_ceil (the paper's diagnostics
    helper). The paper's table is g_exact with g_closed_form_nearest.
    """
    p, fid = _grid(ps, fidelities)
    fid = fid.astype(float)
    eps = np.round(1 - fid, 12)  # 1 - 0.9 = 0.09999999999999998 would nudge G* past an integer
    g_cf = theory.group_size_closed_form(p, eps)
    return pd.DataFrame(
        {
            "p": p.astype(float),
            "fidelity": fid,
            "eps": eps,
            "g_exact": theory.group_size_exact(p, eps),
            "g_closed_form": g_cf,
            "g_closed_form_nearest": theory.round_group_size(g_cf, "nearest"),
            "g_closed_form_ceil": theory.round_group_size(g_cf, "ceil"),
        }
    )


def fidelity_grid(ps: Sequence[float], group_sizes: Sequence[int]) -> pd.DataFrame:
    """Expected gain and silent rates per (p, G).

    Columns: p, G, expected_sigma = E[sigma], sqrt_p_1mp = sqrt(p(1-p)) (the infinite-G limit),
    fidelity = E[sigma]/sqrt(p(1-p)) (0 at p in {0, 1}), fidelity_expansion = 1 - 1/(8 G p(1-p))
    (-inf at p in {0, 1}), silent_rate = p^G + (1-p)^G, all_correct_rate = p^G,
    all_wrong_rate = (1-p)^G.
    """
    p, G = _grid(ps, group_sizes)
    all_correct, all_wrong = theory.silent_rate_split(p, G)  # validates p and G
    return pd.DataFrame(
        {
            "p": p.astype(float),
            "G": G.astype(np.int64),
            "expected_sigma": theory.expected_sigma(p, G),
            "sqrt_p_1mp": np.sqrt(p * (1 - p)),
            "fidelity": theory.fidelity(p, G),
            "fidelity_expansion": theory.fidelity_expansion(p, G),
            "silent_rate": all_correct + all_wrong,
            "all_correct_rate": all_correct,
            "all_wrong_rate": all_wrong,
        }
    )


def difficulty_weight_curve(ps: Sequence[float]) -> pd.DataFrame:
    """How each recipe weights a prompt of pass rate p, per (p, recipe).

    Columns: p, recipe ("grpo" or "dr_grpo"), weight = d(objective)/dp (GRPO 1/sqrt(p(1-p)),
    Dr. GRPO 1), gradient_mass_weight (GRPO sqrt(p(1-p)), Dr. GRPO p(1-p)), implicit_objective
    (GRPO 2 arcsin sqrt(p), Dr. GRPO p).
    """
    p = np.asarray(ps, dtype=float)
    frames = [
        pd.DataFrame(
            {
                "p": p,
                "recipe": recipe,
                "weight": theory.difficulty_weight(p, recipe),
                "gradient_mass_weight": theory.gradient_mass_weight(p, recipe),
                "implicit_objective": theory.implicit_objective(p, recipe),
            }
        )
        for recipe in theory.RECIPES
    ]
    return pd.concat(frames, ignore_index=True)


def group_size_for_silent_table(ps: Sequence[float], deltas: Sequence[float]) -> pd.DataFrame:
    """Smallest G with silent rate p^G + (1-p)^G <= delta, per (p, delta).

    Columns: p, delta, G (-1 if none up to 100,000, which includes p in {0, 1}).
    """
    p, delta = _grid(ps, deltas)
    return pd.DataFrame(
        {
            "p": p.astype(float),
            "delta": delta.astype(float),
            "G": theory.group_size_for_silent_rate(p, delta),
        }
    )


def _mean_se(x: np.ndarray) -> tuple[float, float]:
    """Sample mean and its standard error (NaN where there are too few samples)."""
    mean = float(x.mean()) if x.size else np.nan
    return mean, float(x.std(ddof=1) / np.sqrt(x.size)) if x.size > 1 else np.nan


def _simulate_group_bias(
    p: float, G: int, anchor: float, scale: float, n_groups: int, rng: np.random.Generator
) -> dict[str, float]:
    """Monte Carlo of n_groups groups: response 0's reward r0 ~ Bernoulli(p) and the others' count
    k' ~ Binomial(G-1, p), so k = r0 + k'; means over the non-degenerate groups (0 < k < G)."""
    r0 = rng.random(n_groups) < p  # (N,)
    k = r0 + rng.binomial(G - 1, p, n_groups)  # (N,)
    keep = (k > 0) & (k < G)
    p_hat, r0 = k[keep] / G, r0[keep]
    adv = r0 - p_hat
    hadw = scale * np.exp(-np.sign(adv) * (p_hat - anchor)) * adv
    out = {}
    for name, x in (("baseline", p_hat), ("adv_correct", adv[r0]), ("hadw_adv_correct", hadw[r0])):
        out[f"mc_{name}"], out[f"mc_{name}_se"] = _mean_se(x)
    return out


def group_bias_table(
    ps: Sequence[float],
    group_sizes: Sequence[int],
    anchor: float | None = 0.5,
    scale: float = 1.0,
    n_groups: int = 200_000,
    seed: int = 0,
) -> pd.DataFrame:
    """The non-degenerate-group bias (arXiv 2601.08521) and HA-DW's correction, per (p, G).

    Columns: p, G, anchor (HA-DW's difficulty anchor C; anchor=None uses each row's own p), scale
    (HA-DW's s), nondegenerate = 1 - p^G - (1-p)^G, baseline = E[k/G | 0<k<G], bias = baseline - p,
    adv_correct = E[A | r=1, 0<k<G] and adv_correct_true = 1 - p, adv_wrong = E[A | r=0, 0<k<G] and
    adv_wrong_true = -p, hadw_adv_correct and hadw_adv_wrong (the same with A scaled by HA-DW's
    Phi = s exp(-sgn(A)(p_hat - C))), then a seeded Monte Carlo check of n_groups groups per row:
    n_groups, mc_baseline, mc_adv_correct, mc_hadw_adv_correct, each with its standard error
    (_se); NaN where no group is non-degenerate, as at p in {0, 1}.
    """
    if isinstance(n_groups, bool) or not isinstance(n_groups, (int, np.integer)) or n_groups < 2:
        raise ValueError(f"n_groups must be an integer >= 2, got {n_groups!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    p, G = _grid(ps, group_sizes)
    p = p.astype(float)
    C = p.copy() if anchor is None else np.broadcast_to(np.asarray(anchor, dtype=float), p.shape)
    table = pd.DataFrame({"p": p, "G": G.astype(np.int64), "anchor": C, "scale": float(scale)})
    for g in np.unique(G):  # closed forms: vectorized over p, one G at a time
        at, g = G == g, int(g)
        pg, cg = p[at], C[at]
        for name, values in {
            "nondegenerate": group_bias.nondegenerate_probability(pg, g),
            "baseline": group_bias.nondegenerate_baseline(pg, g),
            "bias": group_bias.baseline_bias(pg, g),
            "adv_correct": group_bias.conditional_advantage(pg, g, True),
            "adv_correct_true": group_bias.true_advantage(pg, True),
            "adv_wrong": group_bias.conditional_advantage(pg, g, False),
            "adv_wrong_true": group_bias.true_advantage(pg, False),
            "hadw_adv_correct": group_bias.hadw_conditional_advantage(pg, g, True, cg, scale),
            "hadw_adv_wrong": group_bias.hadw_conditional_advantage(pg, g, False, cg, scale),
        }.items():
            table.loc[at, name] = values
    seeds = np.random.SeedSequence(int(seed)).spawn(len(table))  # one stream per row
    mc = [
        _simulate_group_bias(pi, int(g), ci, scale, n_groups, np.random.default_rng(ss))
        for pi, g, ci, ss in zip(p, G, C, seeds, strict=True)
    ]
    table["n_groups"] = np.int64(n_groups)
    return pd.concat([table, pd.DataFrame(mc)], axis=1)
