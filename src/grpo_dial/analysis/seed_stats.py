"""Statistics every analysis shares: the Student-t interval of a mean over seeds, the power of
that test, and R^2.

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

The smallest shift a design detects (its power): a two-sided t test at level L, standard error
se and nu degrees of freedom rejects a true shift delta with probability

    P(|T| > t_{(1+L)/2, nu}),   T ~ noncentral t(nu, delta / se),

and the detectable shift at power P is the delta where that probability equals P (solved on the
noncentral t; about (t_{(1+L)/2, nu} + t_{P, nu}) se). One sample or seed-paired differences:
se = s / sqrt(n), nu = n - 1; two independent arms: Welch's se and nu above.

R^2 of predictions f against observations y: 1 - sum (y - f)^2 / sum (y - mean y)^2, NaN when y
is constant (nothing to explain). Pure numpy / scipy.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy import stats

MIN_SEEDS = 3  # fewest finite values that get a t interval
MAX_SHIFT = 100.0  # standard errors: the detectable shift's search bracket (one degree of freedom
#                    and 99.9 % power need about 40)


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


def rejection_power(shift: float, se: float, df: float, level: float = 0.9) -> float:
    """P(|T| > t_{(1+level)/2, df}) for T ~ noncentral t(df, shift / se): the chance a two-sided
    t test at `level` rejects a true `shift` (module docstring); NaN when se or df is not a
    positive finite number or shift is NaN."""
    if not (np.isfinite(se) and se > 0 and np.isfinite(df) and df > 0 and np.isfinite(shift)):
        return float("nan")
    crit = stats.t.ppf((1 + level) / 2, df)
    nc = abs(shift) / se
    # the far tail P(T < -crit) is below 1e-20 where scipy's series returns NaN
    return float(stats.nct.sf(crit, df, nc) + np.nan_to_num(stats.nct.cdf(-crit, df, nc)))


def detectable_shift(se: float, df: float, level: float = 0.9, power: float = 0.8) -> float:
    """The smallest shift a two-sided t test at `level` detects with probability `power`
    (module docstring): rejection_power(shift, se, df, level) = power; NaN as rejection_power,
    or when power is not above the test's size 1 - level."""
    if not (1 - level) + 1e-12 < power < 1:  # at the size itself (to rounding) no shift is needed
        return float("nan")
    if np.isnan(rejection_power(0.0, se, df, level)):
        return float("nan")
    from scipy.optimize import brentq

    # the power is 1 - level at 0 and rises to 1 well before MAX_SHIFT standard errors
    nc = brentq(lambda d: rejection_power(d, 1.0, df, level) - power, 0.0, MAX_SHIFT, xtol=1e-10)
    return float(nc * se)


def sample_se(x) -> tuple[float, float]:
    """(s / sqrt(n), n - 1) of x's finite values: the one-sample (or paired) t test's standard
    error and degrees of freedom; NaN below MIN_SEEDS values."""
    x = np.asarray(x, dtype=float).ravel()
    x = x[np.isfinite(x)]
    if x.size < MIN_SEEDS:
        return float("nan"), float("nan")
    return float(x.std(ddof=1) / np.sqrt(x.size)), float(x.size - 1)


def welch_se(x, y) -> tuple[float, float]:
    """(sqrt(v_x + v_y), nu) of two independent samples' finite values, Welch-Satterthwaite's
    degrees of freedom (module docstring); NaN below MIN_SEEDS values on a side or when both
    are constant."""
    x, y = (np.asarray(v, dtype=float).ravel() for v in (x, y))
    x, y = x[np.isfinite(x)], y[np.isfinite(y)]
    if min(x.size, y.size) < MIN_SEEDS:
        return float("nan"), float("nan")
    vx, vy = x.var(ddof=1) / x.size, y.var(ddof=1) / y.size
    if vx + vy == 0:
        return float("nan"), float("nan")
    nu = (vx + vy) ** 2 / (vx**2 / (x.size - 1) + vy**2 / (y.size - 1))
    return float(np.sqrt(vx + vy)), float(nu)


def r_squared(observed, predicted) -> float:
    """1 - sum (y - f)^2 / sum (y - mean y)^2 with y = observed, f = predicted (same shape);
    NaN when the observed values are constant."""
    y, f = np.asarray(observed, dtype=float), np.asarray(predicted, dtype=float)
    if y.shape != f.shape:
        raise ValueError(f"r_squared: observed {y.shape} and predicted {f.shape} differ in shape")
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    return 1.0 - float(np.sum((y - f) ** 2)) / ss_tot if ss_tot > 0 else float("nan")


__all__ = [
    "MIN_SEEDS", "SeedInterval", "detectable_shift", "difference_interval", "interval_columns",
    "r_squared", "rejection_power", "sample_se", "t_interval", "welch_se",
]  # fmt: skip
