"""Smoothing of per-step curves for legibility: a centred rolling mean over `window` steps,
shorter at the ends (min_periods=1), so a curve keeps its first and last step. The tables behind
a figure keep the raw values."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd


def rolling_mean(series: pd.Series, window: int) -> pd.Series:
    """Centred rolling mean of one curve, ordered as given."""
    return series.rolling(window, center=True, min_periods=1).mean()


def smooth_runs(
    df: pd.DataFrame, columns: Sequence[str], window: int, by: Sequence[str] = ("dial", "seed")
) -> pd.DataFrame:
    """A copy sorted by (*by, step) with each column smoothed within each run."""
    df = df.sort_values([*by, "step"]).copy()
    for column in columns:
        df[column] = df.groupby(list(by))[column].transform(lambda s: rolling_mean(s, window))
    return df
