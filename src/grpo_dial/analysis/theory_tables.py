"""Tidy tables (one row per observation) of the closed forms in `theory`, for figures and report.

Pure functions: inputs are grids of pass rates p, group sizes G and targets; every number comes from
`grpo_dial.core.theory`, nothing is simulated here.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from grpo_dial.core import theory


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
