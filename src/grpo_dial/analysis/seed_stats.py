"""Statistics every analysis shares: the Student-t interval of a mean over seeds, and R^2.

The t interval of the finite values x_1..x_n (NaN dropped) at level L:

    m = sum x_i / n,   s = sqrt(sum (x_i - m)^2 / (n - 1)),
    [m - h, m + h],    h = t_{(1+L)/2, n-1} s / sqrt(n).

It is given only from MIN_SEEDS = 3 values on: with 2 seeds t has one degree of freedom
(t_{0.95, 1} = 6.3, t_{0.975, 1} = 12.7) and the interval is mostly that quantile, wide enough
to put a count below zero. Below 3 values the bounds are NaN and the seeds' own values (their
smallest and largest) stand in; `analysis.markdown.over_seeds` prints them so.

The difference of two means over independent seeds, mean(x) - mean(y), with Welch's t interval
(unequal variances; Welch-Satterthwaite degrees of freedom; scipy's ttest_ind):

    h = t_{(1+L)/2, nu} sqrt(v_x + v_y),
    nu = (v_x + v_y)^2 / (v_x^2 / (n_x - 1) + v_y^2 / (n_y - 1)),  v = s^2 / n,

given from MIN_SEEDS values on each side.

R^2 of predictions f against observations y: 1 - sum (y - f)^2 / sum (y - mean y)^2, NaN when y
is constant (nothing to explain). Pure numpy / scipy.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy import stats

MIN_SEEDS = 3  # fewest finite values that get a t interval


class SeedInterval(NamedTuple):
    """The mean over seeds, its t interval (NaN below MIN_SEEDS values), how many finite values
    stand behind it, and the smallest and largest of them."""

    mean: float
    lo: float
    hi: float
    n: int
    low: float
    high: float


def t_interval(x, level: float = 0.9) -> SeedInterval:
    """The t interval of the mean of x's finite values (module docstring); mean, low and high are
    NaN when none is finite, lo and hi when fewer than MIN_SEEDS are."""
    if not 0 < level < 1:
        raise ValueError(f"t_interval: level must lie in (0, 1), got {level}")
    x = np.asarray(x, dtype=float).ravel()
    x = x[np.isfinite(x)]
    nan = float("nan")
    if x.size == 0:
        return SeedInterval(nan, nan, nan, 0, nan, nan)
    mean, low, high = float(x.mean()), float(x.min()), float(x.max())
    if x.size < MIN_SEEDS:
        return SeedInterval(mean, nan, nan, int(x.size), low, high)
    half = float(stats.t.ppf((1 + level) / 2, x.size - 1) * x.std(ddof=1) / np.sqrt(x.size))
    return SeedInterval(mean, mean - half, mean + half, int(x.size), low, high)


def interval_columns(x, name: str, level: float = 0.9, mean: str | None = None) -> dict:
    """t_interval(x, level) as table columns: the mean under `mean` (default `name`), then
    name_lo, name_hi, name_n, name_min, name_max; `analysis.markdown.over_seeds` reads them back."""
    s = t_interval(x, level)
    return {
        name if mean is None else mean: s.mean,
        f"{name}_lo": s.lo,
        f"{name}_hi": s.hi,
        f"{name}_n": s.n,
        f"{name}_min": s.low,
        f"{name}_max": s.high,
    }


def difference_interval(x, y, level: float = 0.9) -> tuple[float, float, float]:
    """mean(x) - mean(y) over their finite values and Welch's t interval of it (module docstring):
    (difference, lo, hi); NaN bounds below MIN_SEEDS values on either side or when both sides
    are constant."""
    if not 0 < level < 1:
        raise ValueError(f"difference_interval: level must lie in (0, 1), got {level}")
    x, y = (np.asarray(v, dtype=float).ravel() for v in (x, y))
    x, y = x[np.isfinite(x)], y[np.isfinite(y)]
    nan = float("nan")
    if not x.size or not y.size:
        return nan, nan, nan
    diff = float(x.mean() - y.mean())
    if min(x.size, y.size) < MIN_SEEDS or (np.ptp(x) == 0 and np.ptp(y) == 0):
        return diff, nan, nan
    ci = stats.ttest_ind(x, y, equal_var=False).confidence_interval(level)
    return diff, float(ci.low), float(ci.high)


def r_squared(observed, predicted) -> float:
    """1 - sum (y - f)^2 / sum (y - mean y)^2 with y = observed, f = predicted (same shape);
    NaN when the observed values are constant."""
    y, f = np.asarray(observed, dtype=float), np.asarray(predicted, dtype=float)
    if y.shape != f.shape:
        raise ValueError(f"r_squared: observed {y.shape} and predicted {f.shape} differ in shape")
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    return 1.0 - float(np.sum((y - f) ** 2)) / ss_tot if ss_tot > 0 else float("nan")


__all__ = [
    "MIN_SEEDS", "SeedInterval", "difference_interval", "interval_columns", "r_squared",
    "t_interval",
]  # fmt: skip
