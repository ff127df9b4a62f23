"""How a run's length decomposition moves with its windows: the three-term split
(analysis.training.decompose) at several window fractions, the stable terms beside the share.

For each fraction f the before and after windows are a run's first and last f of steps
(`decompose.windows`); per fraction one row with the change in mean length `total`, the
absolute within-incorrect and within-correct changes (characters) and the mix term, each with
its prompt-bootstrap interval, and the share of the total within incorrect responses, reported
(with its interval) only where the total's interval excludes 0: a ratio of two noisy terms whose
denominator may be 0 says nothing there (`share_reported` False, the share columns NaN).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from grpo_dial.analysis.training.decompose import decompose_with_intervals, windows

TERMS = ("total", "within_incorrect", "within_correct", "mix")
WINDOW_COLUMNS = (
    "window_fraction", *(f"{t}{s}" for t in TERMS for s in ("", "_lo", "_hi")),
    "share_reported", "incorrect_share", "incorrect_share_lo", "incorrect_share_hi",
)  # fmt: skip


def excludes_zero(lo: float, hi: float) -> bool:
    """Whether the interval [lo, hi] lies wholly above or below 0 (where a share is reported)."""
    return bool(lo > 0 or hi < 0)


def window_sensitivity(
    responses: pd.DataFrame, fractions: Sequence[float], n_boot: int = 1000, seed: int = 0,
    level: float = 0.9,
) -> pd.DataFrame:  # fmt: skip
    """One row per window fraction (columns WINDOW_COLUMNS) of one run's responses table."""
    if not fractions:
        raise ValueError("window_sensitivity needs at least one window fraction")
    rows = []
    for f in fractions:
        before, after = windows(responses["step"].unique(), fraction=float(f))
        t = decompose_with_intervals(responses, before, after, n_boot=n_boot, seed=seed,
                                     level=level).set_index("quantity")  # fmt: skip
        row = {"window_fraction": float(f)}
        for q in TERMS:
            row |= {q: t.at[q, "value"], f"{q}_lo": t.at[q, "lo"], f"{q}_hi": t.at[q, "hi"]}
        reported = excludes_zero(row["total_lo"], row["total_hi"])
        w = t.loc["within_incorrect"]
        row |= {
            "share_reported": reported,
            "incorrect_share": w["share"] if reported else np.nan,
            "incorrect_share_lo": w["share_lo"] if reported else np.nan,
            "incorrect_share_hi": w["share_hi"] if reported else np.nan,
        }
        rows.append(row)
    return pd.DataFrame(rows, columns=list(WINDOW_COLUMNS))


__all__ = ["TERMS", "WINDOW_COLUMNS", "excludes_zero", "window_sensitivity"]
