"""core.theory: what the full mutation run of theory.py left open (issue 48), against hand numbers
and exact references (math.comb, fractions), and the refusals' exact wording."""

from __future__ import annotations

import math
import re
import warnings
from fractions import Fraction

import numpy as np
import pytest

from grpo_dial.core import theory as T

NAN = float("nan")


def _exact_fidelity(p: float, G: int) -> float:
    """phi(p, G) from exact binomial weights: sum_k C(G,k) p^k (1-p)^(G-k) sqrt(k(G-k)) / G."""
    q = Fraction(p)
    s = math.fsum(
        float(math.comb(G, k) * q**k * (1 - q) ** (G - k)) * math.sqrt(k * (G - k))
        for k in range(1, G)
    )
    return s / G / math.sqrt(p * (1 - p))


# --- refusals: one line, the argument's own name --------------------------------------------------

SIGNALS = "grpo, dr_grpo, nonsilent"

REFUSALS = [
    (lambda: T.allocate_budget([0.5], 8, "x"), f"unknown signal 'x'; valid: {SIGNALS}"),
    (lambda: T.allocate_budget([0.5], 8, "grpo", g_min=0), "g_min must be integers >= 1, got 0"),
    (lambda: T.allocate_budget([0.5], 8, "grpo", g_max=0), "g_max must be integers >= 1, got 0"),
    (lambda: T.expected_signal(0.5, 2, "x"), f"unknown signal 'x'; valid: {SIGNALS}"),
    (lambda: T.fidelity(0.5, 0), "G must be integers >= 1, got 0"),
    (lambda: T.fidelity(0.5, NAN), "G must not contain NaN"),
    (lambda: T.fidelity(0.5, "a"), "G must be numeric, got 'a'"),
    (lambda: T.silent_rate(0.5, 2**53 + 2), "G must be at most 2**53, got 9007199254740994"),
    (lambda: T.gradient_mass_weight(0.5, "x"), "unknown recipe 'x'; valid: grpo, dr_grpo"),
    (lambda: T.implicit_objective(0.5, "x"), "unknown recipe 'x'; valid: grpo, dr_grpo"),
    (lambda: T.group_sigma(1, 0), "G must be integers >= 1, got 0"),
    (lambda: T.group_sigma(3, 2), "k must not exceed G"),
    (lambda: T.group_size_exact(0.5, NAN), "eps must not contain NaN"),
    (
        lambda: T.group_size_for_silent_rate(0.5, 0.1, g_max=0),
        "g_max must be integers >= 1, got 0",
    ),
    (
        lambda: T.mass_share([0.5], 0, 1, "grpo", closed="x"),
        "unknown closed 'x'; valid: both, neither, left, right",
    ),
    (lambda: T.mass_share([0.5], 0.0, NAN, "grpo"), "hi must not contain NaN"),
    (lambda: T.mass_share([0.5], 0.6, 0.4, "grpo"), "lo must not exceed hi"),
    (lambda: T.round_group_size(3.0, "x"), "unknown rounding 'x'; valid: nearest, ceil"),
    (lambda: T.round_group_size(NAN), "g must not contain NaN"),
    (lambda: T.round_group_size(-1.0), "g must be >= 0"),
    (lambda: T.silent_rate_without_replacement(-1, 4, 2), "c must be integers >= 0, got -1"),
    (lambda: T.silent_rate_without_replacement(1, 0, 1), "n must be integers >= 1, got 0"),
    (lambda: T.silent_rate_without_replacement(1, 4, 0), "G must be integers >= 1, got 0"),
    (
        lambda: T.silent_rate_without_replacement(5, 4, 2),
        "c (correct rollouts) must not exceed n (logged rollouts)",
    ),
    (
        lambda: T.silent_rate_without_replacement(1, 4, 5),
        "G must not exceed n: cannot draw more rollouts than were logged",
    ),
]


@pytest.mark.parametrize(("call", "message"), REFUSALS)
def test_refusals_word_for_word(call, message):
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        call()


# --- group sizes past int64's reach ---------------------------------------------------------------


def test_huge_groups_do_not_overflow():
    # k (G - k) = 2^64 overflows int64; sigma(2^32, 2^33) = 2^32 / 2^33 = 1/2 by hand
    assert T.group_sigma(2**32, 2**33) == 0.5
    # p = 1/2, G = 2^33: phi = 1 - 1/(8 G p (1-p)) + O(G^-2), so E[sigma] = (1 - 2^-34) / 2
    got = T.expected_sigma(0.5, 2**33)
    assert got == pytest.approx(0.5 * (1 - 2.0**-34), rel=1e-12)
    # the largest accepted size: Dr. GRPO's signal p(1-p)(1 - 1/G) at G = 2^53
    assert T.expected_signal(0.5, 2**53, "dr_grpo") == pytest.approx(0.25 * (1 - 2.0**-53))


# --- expected sigma and fidelity -----------------------------------------------------------------


def test_fidelity_is_zero_wherever_p_is_unanimous():
    # G = 2, p = 1/2: E[sigma] = 2 p (1-p) / 2 = 1/4 and sd = 1/2, so phi = 1/2. 200 prompts, so
    # the output is a fresh heap block: zeros at p in {0, 1} must be written, not found there
    p = np.full(200, 0.5)
    p[[0, 1, 2, 197, 198, 199]] = [0.0, 0.0, 1.0, 1.0, 0.0, 1.0]
    want = np.where((p == 0) | (p == 1), 0.0, 0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):
            np.testing.assert_allclose(T.fidelity(p, 2), want, rtol=1e-14, atol=0)


def test_expected_sigma_beside_a_unanimous_prompt():
    # one call with p = 1 (zero spread) next to p = 0.3, G = 10; exact sum by math.comb
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = T.expected_sigma([1.0, 0.3, 0.0], 10)
    want = _exact_fidelity(0.3, 10) * math.sqrt(0.3 * 0.7)
    np.testing.assert_allclose(got, [0.0, want, 0.0], rtol=1e-13)


def test_expected_sigma_power_at_zero_power_is_the_non_silent_rate_without_a_warning():
    # sigma^0 is 1 on every non-silent group and 0 on a silent one: 1 - p^4 - (1-p)^4
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = T.expected_sigma_power(np.array([0.3, 0.5]), 4, 0.0)
    np.testing.assert_allclose(got, [1 - 0.3**4 - 0.7**4, 1 - 2 * 0.5**4], rtol=1e-14)
    assert got[0] == pytest.approx(0.7518, rel=1e-12)


def test_expected_sigma_power_takes_an_object_column():
    # a pandas column of dtype object arrives as an object array; G = 2: 2 p (1-p) * 1/2
    p = np.array([0.3, 0.5], dtype=object)
    np.testing.assert_allclose(T.expected_sigma_power(p, 2, 1.0), [0.21, 0.25], rtol=1e-14)


# --- planners -------------------------------------------------------------------------------------


def _silent_scan(p: float, delta: float) -> int:
    q, d = Fraction(p), Fraction(delta)
    return next(G for G in range(1, 10_000) if q**G + (1 - q) ** G <= d)


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5, 0.77, 0.93])
@pytest.mark.parametrize("delta", [0.4, 0.05, 1e-3, 1e-6])
def test_group_size_for_silent_rate_against_exact_fractions(p, delta):
    assert int(T.group_size_for_silent_rate(p, delta)) == _silent_scan(p, delta)


@pytest.mark.parametrize("p", [0.2, 0.5, 0.9])
@pytest.mark.parametrize("eps", [0.3, 0.1, 0.05, 0.02])
def test_group_size_exact_against_exact_binomial_sums(p, eps):
    want = next(G for G in range(1, 1000) if _exact_fidelity(p, G) >= 1 - eps)
    assert int(T.group_size_exact(p, eps)) == want


@pytest.mark.parametrize("want", [69, 87, 99])
def test_bisection_below_a_g_max_that_is_no_power_of_two(want):
    # p = 1/2: silent rate 2^(1-G) <= delta = 2^(1-t) iff G >= t; t = want - 3/4, so the smallest
    # integer is `want`, found by bisecting [64, 100] (g_max = 100 caps the doubling)
    delta = 2.0 ** (1 - (want - 0.75))
    assert int(T.group_size_for_silent_rate(0.5, delta, g_max=100)) == want


def test_default_g_max_is_one_hundred_thousand():
    # p = 1e-4: the silent rate (1-p)^G + p^G falls by a factor 1-p per step in G; delta between
    # its values at G = 100,000 and 100,001 is first met at 100,001, one past the default g_max
    p = 1e-4
    s = [math.exp(G * math.log1p(-p)) for G in (100_000, 100_001)]
    delta = (s[0] + s[1]) / 2
    assert int(T.group_size_for_silent_rate(p, delta)) == -1
    assert int(T.group_size_for_silent_rate(p, delta, g_max=100_001)) == 100_001
    # fidelity: phi(1/2, G) rises by about 1/(2 G^2) = 5e-11 from G = 100,000 to 100,001
    f = [_exact_fidelity_large(0.5, G) for G in (100_000, 100_001)]
    eps = 1 - (f[0] + f[1]) / 2
    assert int(T.group_size_exact(0.5, eps)) == -1
    assert int(T.group_size_exact(0.5, eps, g_max=100_001)) == 100_001


def _exact_fidelity_large(p: float, G: int) -> float:
    """phi(p, G) for large G: binomial weights relative to the mode by the ratio
    w(k+1)/w(k) = (G-k)/(k+1) * p/(1-p), normalized by their own sum (fsum): no log-gamma of G."""
    mode, r = int((G + 1) * p), p / (1 - p)
    w = {mode: 1.0}
    for k in range(mode, G):
        w[k + 1] = w[k] * (G - k) / (k + 1) * r
        if w[k + 1] < 1e-30:
            break
    for k in range(mode, 0, -1):
        w[k - 1] = w[k] * k / ((G - k + 1) * r)
        if w[k - 1] < 1e-30:
            break
    num = math.fsum(v * math.sqrt(k * (G - k)) for k, v in w.items())
    return num / math.fsum(w.values()) / G / math.sqrt(p * (1 - p))


# --- rounding -------------------------------------------------------------------------------------


def test_round_group_size_below_one_and_float_noise():
    np.testing.assert_array_equal(T.round_group_size([0.0, 0.4, 0.5, 0.9]), [0, 0, 1, 1])
    # noise of 4e-10 over an integer is dropped before the ceiling: 5 + 4e-10 -> 5
    assert int(T.round_group_size(5 + 4e-10, "ceil")) == 5
    assert int(T.round_group_size(5 + 2e-9, "ceil")) == 6
    assert T.round_group_size([2.6, np.inf]).dtype == np.int64


# --- no warnings at the documented edges ----------------------------------------------------------


def test_edges_are_silent():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert T.difficulty_weight(0.0, "grpo") == np.inf
        assert T.group_size_closed_form(1.0, 0.1) == np.inf
        # every prompt unanimous: no mass, so no share (NaN), and no 0/0 warning
        assert np.isnan(T.mass_share([0.0, 1.0], 0.0, 1.0, "grpo"))
        assert np.isnan(T.mass_share([0.0, 1.0], [0.0, 0.5], 1.0, "dr_grpo")).all()


# --- the budget allocator -------------------------------------------------------------------------


def test_allocator_never_tops_up_a_unanimous_prompt():
    # skip_unanimous=False: p = 0 is funded at g_min but its gains are all 0, so the leftover
    # budget (100 - 4) tops up only p = 1/2, to g_max
    got = T.allocate_budget([0.0, 0.5], 100, "grpo", g_min=2, g_max=4, skip_unanimous=False)
    np.testing.assert_array_equal(got, [2, 4])


def test_allocator_default_g_max_is_64():
    # Dr. GRPO's gain p(1-p)(1/G - 1/(G+1)) > 0 at every G, so one prompt takes g_max
    np.testing.assert_array_equal(T.allocate_budget([0.5], 1000, "dr_grpo"), [64])


def test_allocator_breaks_ties_by_lower_index():
    # 30 prompts at p = 1/2 and 30 at p = 0.1, interleaved; budget for 10 prompts at g_min = 2:
    # the ten p = 1/2 prompts of lowest index (0, 2, ..., 18)
    p = [0.5, 0.1] * 30
    got = T.allocate_budget(p, 20, "grpo", g_min=2, g_max=2)
    want = np.zeros(60, int)
    want[0:20:2] = 2
    np.testing.assert_array_equal(got, want)


def test_allocator_takes_the_largest_gains_exactly():
    # nonsilent f(G) = 1 - p^G - (1-p)^G is concave in G, so the optimum is f(1) for each prompt
    # plus the largest budget - J exact gains (fractions); the allocator must reach it
    p = [0.865, 0.205, 0.193, 0.787, 0.828, 0.586, 0.8, 0.159, 0.522]
    p += [0.218, 0.364, 0.483, 0.686, 0.27, 0.388, 0.373, 0.414, 0.634]
    budget, g_max = 497, 35
    q = [Fraction(round(x * 1000), 1000) for x in p]

    def f(x: Fraction, G: int) -> Fraction:
        return 1 - x**G - (1 - x) ** G

    gains = sorted((f(x, G + 1) - f(x, G) for x in q for G in range(1, g_max)), reverse=True)
    best = sum(f(x, 1) for x in q) + sum(gains[: budget - len(p)])
    got = T.allocate_budget(p, budget, "nonsilent", g_min=1, g_max=g_max)
    assert got.sum() == budget and got.min() >= 1 and got.max() <= g_max
    reached = sum(f(x, int(G)) for x, G in zip(q, got, strict=True))
    assert float(best - reached) < 1e-12
