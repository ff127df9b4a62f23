"""Tests for grpo_dial.analysis.seed_stats: the t interval over seeds against hand numbers and
scipy.stats.t, no interval below 3 seeds, and R^2 with its argument order."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from grpo_dial.analysis.seed_stats import (
    MIN_SEEDS,
    detectable_shift,
    difference_interval,
    interval_columns,
    r_squared,
    rejection_power,
    sample_se,
    t_interval,
    welch_se,
)


def test_t_interval_by_hand():
    # x = 1, 2, 4: mean 7/3, sd sqrt(7/3), se sqrt(7/9); t_{0.95, 2} = 2.919986
    s = t_interval([1.0, 2.0, 4.0], 0.9)
    half = 2.919986 * np.sqrt(7 / 9)
    assert s.mean == pytest.approx(7 / 3)
    assert (s.lo, s.hi) == pytest.approx((7 / 3 - half, 7 / 3 + half), abs=1e-5)
    assert (s.lo, s.hi) == pytest.approx((-0.24185, 4.90852), abs=1e-5)
    assert (s.n, s.low, s.high) == (3, 1.0, 4.0)


@pytest.mark.parametrize("level", [0.8, 0.9, 0.95])
@pytest.mark.parametrize("n", [3, 5, 12])
def test_t_interval_is_scipy_student_t(n, level):
    x = np.random.default_rng(n).normal(3.0, 2.0, n)
    s = t_interval(x, level)
    want = stats.t.interval(level, n - 1, loc=x.mean(), scale=stats.sem(x))
    assert (s.lo, s.hi) == pytest.approx(want, rel=1e-12)


def test_non_finite_values_are_dropped_and_counted_out():
    s = t_interval([1.0, np.nan, 2.0, np.inf, 4.0], 0.9)
    assert s == t_interval([1.0, 2.0, 4.0], 0.9)


def test_no_interval_below_three_seeds():
    assert MIN_SEEDS == 3
    two = t_interval([3066.0, 2400.0], 0.95)
    assert two.mean == 2733.0 and np.isnan(two.lo) and np.isnan(two.hi)
    assert (two.n, two.low, two.high) == (2, 2400.0, 3066.0)
    one = t_interval([np.nan, 5.0])
    assert (one.mean, one.n, one.low, one.high) == (5.0, 1, 5.0, 5.0) and np.isnan(one.lo)
    none = t_interval([np.nan])
    assert none.n == 0 and np.isnan(none.mean) and np.isnan(none.low)


def test_bad_level_is_one_line():
    with pytest.raises(ValueError, match=r"level must lie in \(0, 1\), got 95"):
        t_interval([1.0, 2.0, 3.0], 95)


def test_interval_columns_names():
    cols = interval_columns([1.0, 2.0, 4.0], "drift", 0.9)
    assert list(cols) == ["drift", "drift_lo", "drift_hi", "drift_n", "drift_min", "drift_max"]
    assert cols["drift_lo"] == t_interval([1.0, 2.0, 4.0], 0.9).lo
    assert list(interval_columns([1.0], "diff", mean="diff_mean"))[0] == "diff_mean"


def test_r_squared_by_hand_and_its_argument_order():
    # observed 1 2 3 4 (mean 2.5, ss_tot 5), predicted 1 2 3 5: ss_res 1, R^2 = 0.8; swapped,
    # ss_tot of 1 2 3 5 is 8.75, so 1 - 1 / 8.75 would be the wrong answer
    assert r_squared([1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 5.0]) == pytest.approx(0.8)
    assert np.isnan(r_squared([2.0, 2.0], [1.0, 3.0]))  # nothing to explain
    with pytest.raises(ValueError, match=r"observed \(2,\) and predicted \(3,\)"):
        r_squared([1.0, 2.0], [1.0, 2.0, 3.0])


def test_difference_interval_is_welch_by_hand():
    # x = 1, 2, 3 (mean 2, s^2 1), y = 0, 0, 1, 1, nan (mean 0.5, s^2 1/3): v_x = 1/3, v_y = 1/12,
    # nu = (5/12)^2 / ((1/3)^2 / 2 + (1/12)^2 / 3) = 3 exactly, h = t_{0.95, 3} sqrt(5/12)
    diff, lo, hi = difference_interval([1.0, 2.0, 3.0], [0.0, 0.0, 1.0, 1.0, np.nan], 0.9)
    h = 2.353363434801823 * np.sqrt(5 / 12)  # t_{0.95, 3} from a table
    assert diff == pytest.approx(1.5)
    assert (lo, hi) == (pytest.approx(1.5 - h), pytest.approx(1.5 + h))
    assert difference_interval([5.0, 6.0, 7.0], [1.0, 2.0, 3.0])[0] == pytest.approx(4.0)  # x - y


def test_difference_interval_needs_three_seeds_a_side():
    diff, lo, hi = difference_interval([1.0, 2.0], [0.0, 1.0, 2.0])
    assert diff == pytest.approx(0.5) and np.isnan(lo) and np.isnan(hi)
    assert all(np.isnan(difference_interval([], [1.0, 2.0, 3.0])))
    with pytest.raises(ValueError, match="level must lie in"):
        difference_interval([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], 1.0)


def test_difference_interval_with_one_constant_side():
    # x constant (v_x = 0): nu = n_y - 1 = 2 and h = t_{0.95, 2} s_y / sqrt(n_y); and mirrored
    t2 = 2.919985580355516  # t_{0.95, 2} from a table
    h = t2 * np.sqrt(1 / 3)
    assert difference_interval([1.0, 1.0, 1.0], [0.0, 1.0, 2.0]) == pytest.approx((0.0, -h, h))
    mirrored = difference_interval([0.0, 1.0, 2.0], [3.0, 3.0, 3.0])
    assert mirrored == pytest.approx((-2.0, -2.0 - h, -2.0 + h))
    both = difference_interval([1.0, 1.0, 1.0], [2.0, 2.0, 2.0])  # nothing varies: no interval
    assert both[0] == pytest.approx(-1.0) and np.isnan(both[1]) and np.isnan(both[2])


def _power_by_integral(shift: float, se: float, df: int, level: float = 0.9) -> float:
    """P(|(Z + shift / se) / sqrt(V / df)| > t_c), V ~ chi^2(df), integrated over V: the t test's
    power without the noncentral t distribution."""
    from scipy import integrate

    c, d = stats.t.ppf((1 + level) / 2, df), shift / se

    def f(v: float) -> float:
        s = c * np.sqrt(v / df)
        return stats.chi2.pdf(v, df) * (stats.norm.cdf(d - s) + stats.norm.cdf(-d - s))

    return integrate.quad(f, 0, np.inf)[0]


@pytest.mark.parametrize(("df", "level", "power"), [(3, 0.9, 0.8), (9, 0.9, 0.8), (9, 0.95, 0.9),
                                                     (40, 0.9, 0.5)])  # fmt: skip
def test_detectable_shift_has_the_stated_power_by_an_integral(df, level, power):
    se = 0.37
    shift = detectable_shift(se, df, level, power)
    assert _power_by_integral(shift, se, df, level) == pytest.approx(power, abs=1e-6)
    assert rejection_power(shift, se, df, level) == pytest.approx(power, abs=1e-9)
    assert rejection_power(-shift, se, df, level) == pytest.approx(power, abs=1e-9)  # two-sided
    # about (t_{(1+L)/2} + t_P) se, the textbook shortcut, within 2 % from 3 degrees of freedom
    shortcut = (stats.t.ppf((1 + level) / 2, df) + stats.t.ppf(power, df)) * se
    assert shift == pytest.approx(shortcut, rel=0.02)


def test_power_at_no_shift_is_the_size_and_the_edges_are_nan():
    assert rejection_power(0.0, 1.0, 9, 0.9) == pytest.approx(0.1)
    assert rejection_power(0.9, 0.4625, 3) == pytest.approx(0.445428, abs=1e-6)  # the integral's
    assert detectable_shift(1.0, 1e6) == pytest.approx(1.6449 + 0.8416, abs=1e-3)  # the normal's
    for se, df in ((0.0, 9), (np.nan, 9), (1.0, 0), (1.0, np.nan)):
        assert np.isnan(rejection_power(1.0, se, df)) and np.isnan(detectable_shift(se, df))
    assert np.isnan(detectable_shift(1.0, 9, 0.9, 0.05))  # power below the test's size
    assert np.isnan(rejection_power(np.nan, 1.0, 9))


def test_sample_and_welch_standard_errors_by_hand():
    se, df = sample_se([1.0, 2.0, 4.0, np.nan])  # sd sqrt(7/3), n 3
    assert (se, df) == (pytest.approx(np.sqrt(7 / 3) / np.sqrt(3)), 2.0)
    assert all(np.isnan(v) for v in sample_se([1.0, 2.0]))
    x, y = [1.0, 2.0, 4.0], [0.0, 0.0, 1.0, 1.0]  # v_x 7/9, v_y 1/12
    se, nu = welch_se(x, y)
    vx, vy = 7 / 9, 1 / 12
    assert se == pytest.approx(np.sqrt(vx + vy))
    assert nu == pytest.approx((vx + vy) ** 2 / (vx**2 / 2 + vy**2 / 3))
    assert all(np.isnan(v) for v in welch_se([1.0, 1.0, 1.0], [2.0, 2.0, 2.0]))


def test_one_degree_of_freedom_and_the_power_edges():
    shift = detectable_shift(0.5, 1)  # two seeds' paired difference: t has 1 degree of freedom
    assert np.isfinite(shift) and _power_by_integral(shift, 0.5, 1) == pytest.approx(0.8, abs=1e-6)
    assert np.isfinite(rejection_power(1.0, 1.0, 1))
    assert np.isnan(detectable_shift(1.0, 9, 0.9, 0.1))  # power equal to the test's size
    assert np.isnan(detectable_shift(1.0, 9, 0.9, 1.0))  # certainty needs an infinite shift


def test_welch_se_below_three_values_and_at_equal_spreads():
    assert all(np.isnan(v) for v in welch_se([1.0, 2.0], [1.0, 2.0, 3.0]))
    se, nu = welch_se([1.0, 2.0, 3.0], [4.0, 5.0, 6.0])  # v_x = v_y = 1/3: nu = 4
    assert (se, nu) == (pytest.approx(np.sqrt(2 / 3)), pytest.approx(4.0))
