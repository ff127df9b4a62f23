"""Tests for grpo_dial.core.theory: paper numbers, loop, Monte Carlo and brute-force references."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grpo_dial.core import theory as T

# docs/design-notes.md#reference-numbers: p -> {fidelity: (exact G, closed form rounded to nearest)}
PAPER_TABLE = {
    0.50: {0.90: (7, 5), 0.95: (11, 10), 0.99: (51, 50)},
    0.30: {0.90: (9, 6), 0.95: (14, 12), 0.99: (61, 60)},
    0.10: {0.90: (22, 14), 0.95: (36, 28), 0.99: (144, 139)},
    0.05: {0.90: (42, 26), 0.95: (69, 53), 0.99: (273, 263)},
}
PAPER_CASES = [(p, f, *v) for p, row in PAPER_TABLE.items() for f, v in row.items()]


def slow_expected_sigma(p: float, G: int) -> float:
    """Loop over k with exact binomial coefficients."""
    total = 0.0
    for k in range(1, G):
        total += math.comb(G, k) * p**k * (1 - p) ** (G - k) * math.sqrt(k * (G - k))
    return total / G


def slow_fidelity(p: float, G: int) -> float:
    return slow_expected_sigma(p, G) / math.sqrt(p * (1 - p))


# --- reference numbers ---------------------------------------------------------------------------


@pytest.mark.parametrize("p, fid, g_exact, g_nearest", PAPER_CASES)
@pytest.mark.parametrize("mirror", [False, True])
def test_paper_group_size_table(p, fid, g_exact, g_nearest, mirror):
    q = 1 - p if mirror else p
    eps = 1 - fid  # raw float, e.g. 0.09999999999999998: rounding must be robust to it
    assert int(T.group_size_exact(q, eps)) == g_exact
    assert int(T.round_group_size(T.group_size_closed_form(q, eps), "nearest")) == g_nearest


def test_paper_table_vectorized_in_one_call():
    p = np.array(list(PAPER_TABLE))[:, None]  # (4, 1)
    fid = np.array([0.90, 0.95, 0.99])[None, :]  # (1, 3)
    want = np.array([[PAPER_TABLE[pp][f][0] for f in (0.90, 0.95, 0.99)] for pp in PAPER_TABLE])
    np.testing.assert_array_equal(T.group_size_exact(p, 1 - fid), want)
    np.testing.assert_array_equal(T.group_size_exact(1 - p, 1 - fid), want)


def test_paper_fidelity_at_g8():
    assert round(float(T.fidelity(0.5, 8)), 2) == 0.93
    assert round(float(T.fidelity(0.05, 8)), 2) == 0.54
    assert float(T.fidelity(0.5, 8)) == pytest.approx(slow_fidelity(0.5, 8), rel=1e-12)


def test_round_group_size_conventions():
    assert int(T.round_group_size(26.3, "nearest")) == 26
    assert int(T.round_group_size(26.3, "ceil")) == 27
    assert int(T.round_group_size(2.5, "nearest")) == 3  # half up, not banker's
    noisy = 1 / (8 * (1 - 0.9) * 0.25)
    assert noisy > 5
    np.testing.assert_array_equal(T.round_group_size([noisy, noisy], "ceil"), [5, 5])
    np.testing.assert_array_equal(T.round_group_size([np.inf, 7.0, 7.2]), [-1, 7, 7])


# --- group sigma, silent rates -------------------------------------------------------------------


def test_group_sigma_matches_numpy_std():
    for G in range(1, 9):
        for k in range(G + 1):
            r = np.r_[np.ones(k), np.zeros(G - k)]
            assert float(T.group_sigma(k, G)) == pytest.approx(r.std(), abs=1e-15)
    np.testing.assert_allclose(T.group_sigma([0, 1, 2, 1], [4, 1, 4, 4]), [0, 0, 0.5, 3**0.5 / 4])


def test_silent_rate_split_and_edges():
    ac, aw = T.silent_rate_split([0.0, 1.0, 0.3, 0.3], [5, 5, 1, 3])
    np.testing.assert_allclose(ac, [0, 1, 0.3, 0.027])
    np.testing.assert_allclose(aw, [1, 0, 0.7, 0.343])
    np.testing.assert_allclose(T.silent_rate([0.0, 1.0, 0.3, 0.3], [5, 5, 1, 3]), [1, 1, 1, 0.37])


def test_without_replacement_matches_exact_fractions():
    for n in range(1, 13):
        for c in range(n + 1):
            G = np.arange(1, n + 1)
            want = [
                float(Fraction(math.comb(c, g) + math.comb(n - c, g), math.comb(n, g))) for g in G
            ]
            np.testing.assert_allclose(T.silent_rate_without_replacement(c, n, G), want, rtol=1e-12)
    # G = n draws everything: silent iff the log is unanimous
    np.testing.assert_allclose(T.silent_rate_without_replacement([0, 3, 64], 64, 64), [1, 0, 1])


def test_without_replacement_large_n_is_stable():
    want = float(Fraction(math.comb(200, 16) + math.comb(300, 16), math.comb(500, 16)))
    assert float(T.silent_rate_without_replacement(200, 500, 16)) == pytest.approx(want, rel=1e-10)


# --- Monte Carlo ---------------------------------------------------------------------------------

N_MC = 200_000


@pytest.mark.parametrize("p, G", [(0.5, 8), (0.05, 8), (0.3, 1), (0.9, 16), (0.02, 64)])
def test_expected_sigma_and_silent_rate_monte_carlo(p, G):
    rng = np.random.default_rng(1234 + G)
    k = rng.binomial(G, p, size=N_MC)  # (N,)
    sig = np.sqrt(k * (G - k)) / G
    se = max(sig.std() / math.sqrt(N_MC), 1e-12)
    assert abs(sig.mean() - float(T.expected_sigma(p, G))) < 4 * se
    silent = (k == 0) | (k == G)
    se = max(silent.std() / math.sqrt(N_MC), 1e-12)
    assert abs(silent.mean() - float(T.silent_rate(p, G))) < 4 * se
    assert abs((sig**2).mean() - float(T.expected_signal(p, G, "dr_grpo"))) < 4 * max(
        (sig**2).std() / math.sqrt(N_MC), 1e-12
    )


@pytest.mark.parametrize("c, n, G", [(5, 16, 4), (32, 64, 8), (1, 20, 8), (60, 64, 16)])
def test_without_replacement_monte_carlo(c, n, G):
    rng = np.random.default_rng(c * 1000 + n + G)
    draws = rng.random((N_MC, n)).argsort(axis=1)[:, :G]  # (N, G) indices drawn without replacement
    k = (draws < c).sum(1)  # rollouts 0..c-1 are the correct ones
    silent = (k == 0) | (k == G)
    se = max(silent.std() / math.sqrt(N_MC), 1e-12)
    assert abs(silent.mean() - float(T.silent_rate_without_replacement(c, n, G))) < 4 * se


# --- expected sigma, fidelity --------------------------------------------------------------------


def test_expected_sigma_matches_loop_and_broadcasts():
    p = np.array([0.0, 0.01, 0.3, 0.5, 0.77, 1.0])[:, None]  # (6, 1)
    G = np.array([1, 2, 3, 8, 33, 80])[None, :]  # (1, 6)
    got = T.expected_sigma(p, G)
    assert got.shape == (6, 6)
    want = [[slow_expected_sigma(pp, gg) for gg in G[0]] for pp in p[:, 0]]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)
    assert float(T.expected_sigma(0.4, 2)) == pytest.approx(0.4 * 0.6)  # 2 p q * (1/2)


@pytest.mark.parametrize("p", [0.3, 1e-3, 0.999])
def test_expected_sigma_window_equals_full_sum_at_large_g(p):
    from scipy.stats import binom

    G = 3000
    k = np.arange(G + 1)
    full = (binom.pmf(k, G, p) * np.sqrt(k * (G - k))).sum() / G
    assert float(T.expected_sigma(p, G)) == pytest.approx(full, rel=1e-12)


def test_fidelity_edges_and_bound():
    np.testing.assert_array_equal(T.fidelity([0.0, 1.0, 0.3], [8, 8, 1]), [0, 0, 0])
    p = np.linspace(0.01, 0.99, 25)[:, None]
    G = np.arange(1, 60)[None, :]
    # Jensen: E[sigma] <= sqrt(E[sigma^2]) = sqrt(p(1-p)(1-1/G))
    assert (T.expected_sigma(p, G) <= np.sqrt(p * (1 - p) * (1 - 1 / G)) + 1e-15).all()


def test_fidelity_is_monotone_in_g():
    """Justifies the doubling + bisection search in group_size_exact."""
    p = np.r_[1e-4, np.linspace(0.005, 0.995, 45)][:, None]
    phi = T.fidelity(p, np.arange(1, 400)[None, :])  # (46, 399)
    assert (np.diff(phi, axis=1) > 0).all()


@pytest.mark.parametrize("p", [0.5, 0.3, 0.05])
def test_expansion_approaches_fidelity(p):
    G = np.array([10, 100, 1_000, 10_000])
    err = np.abs(T.fidelity(p, G) - T.fidelity_expansion(p, G))
    assert (np.diff(err) < 0).all()
    assert err[-1] < 1e-6  # next term is O(1/G^2)
    assert (err * G)[-1] < 0.01 * (err * G)[0]  # faster than the 1/G term itself
    assert np.isneginf(T.fidelity_expansion(0.0, 8))


# --- planners ------------------------------------------------------------------------------------


def test_group_size_exact_matches_scan():
    p = np.array([0.02, 0.15, 0.4, 0.5, 0.81, 0.97])
    eps = np.array([0.3, 0.1, 0.05, 0.02])
    Gs = np.arange(1, 3000)
    phi = T.fidelity(p[:, None], Gs[None, :])  # (6, 2999)
    want = np.array([[Gs[np.argmax(row >= 1 - e)] for e in eps] for row in phi])
    np.testing.assert_array_equal(T.group_size_exact(p[:, None], eps[None, :]), want)


def test_group_size_exact_sentinels_and_g_max():
    np.testing.assert_array_equal(T.group_size_exact([0.0, 1.0, 0.5], 0.1), [-1, -1, 7])
    assert int(T.group_size_exact(0.5, 0.1, g_max=6)) == -1
    assert int(T.group_size_exact(0.5, 0.1, g_max=7)) == 7
    assert int(T.group_size_exact(0.5, 0.99)) == 2  # G = 1 is always silent, so never qualifies
    assert T.group_size_exact([0.2, 0.3], 0.1).dtype == np.int64


def test_group_size_for_silent_rate_matches_scan():
    p = np.array([0.0, 1e-3, 0.05, 0.3, 0.5, 0.9, 1.0])
    delta = np.array([0.5, 0.1, 0.01])
    Gs = np.arange(1, 20_000)
    got = T.group_size_for_silent_rate(p[:, None], delta[None, :])
    for i, pp in enumerate(p):
        for j, d in enumerate(delta):
            ok = pp**Gs + (1 - pp) ** Gs <= d
            assert got[i, j] == (Gs[np.argmax(ok)] if ok.any() else -1)
    assert int(T.group_size_for_silent_rate(0.5, 0.05)) == 6  # 2 * 2^-G <= 0.05 -> G >= 5.32
    assert int(T.group_size_for_silent_rate(1e-3, 0.01, g_max=100)) == -1


# --- difficulty weights and gradient mass --------------------------------------------------------


@pytest.mark.parametrize("recipe", T.RECIPES)
def test_difficulty_weight_is_derivative_of_objective(recipe):
    p, h = np.linspace(0.02, 0.98, 49), 1e-6
    num = (T.implicit_objective(p + h, recipe) - T.implicit_objective(p - h, recipe)) / (2 * h)
    np.testing.assert_allclose(T.difficulty_weight(p, recipe), num, rtol=1e-6)


def test_weights_at_the_edges():
    assert np.isinf(T.difficulty_weight([0.0, 1.0], "grpo")).all()
    np.testing.assert_array_equal(T.difficulty_weight([0.0, 0.5], "dr_grpo"), [1, 1])
    np.testing.assert_allclose(T.gradient_mass_weight([0, 0.5, 1], "grpo"), [0, 0.5, 0])
    np.testing.assert_allclose(T.gradient_mass_weight([0, 0.5, 1], "dr_grpo"), [0, 0.25, 0])
    np.testing.assert_allclose(T.implicit_objective([0, 0.5, 1], "grpo"), [0, np.pi / 2, np.pi])


@pytest.mark.parametrize("closed", T.CLOSED)
@pytest.mark.parametrize("recipe", T.RECIPES)
def test_mass_share_matches_loop(closed, recipe):
    p = np.array([0.0, 0.05, 0.1, 0.4, 0.5, 0.6, 0.9, 0.95, 1.0, 0.4])
    bands = [(0.0, 0.1), (0.4, 0.6), (0.9, 1.0), (0.5, 0.5), (0.0, 1.0)]
    w = {"grpo": lambda x: math.sqrt(x * (1 - x)), "dr_grpo": lambda x: x * (1 - x)}[recipe]
    inc_lo, inc_hi = closed in ("both", "left"), closed in ("both", "right")
    total = sum(w(x) for x in p)
    want = [
        sum(w(x) for x in p if (x >= lo if inc_lo else x > lo) and (x <= hi if inc_hi else x < hi))
        / total
        for lo, hi in bands
    ]
    lo, hi = np.array(bands).T
    np.testing.assert_allclose(T.mass_share(p, lo, hi, recipe, closed), want, rtol=1e-12)


def test_mass_share_edges():
    assert float(T.mass_share([0.2, 0.8], 0.0, 1.0, "grpo")) == pytest.approx(1.0)
    assert np.isnan(T.mass_share([0.0, 1.0, 1.0], 0.0, 1.0, "grpo"))
    assert np.isnan(T.mass_share([], 0.0, 1.0, "dr_grpo"))
    # GRPO puts more of its mass on extreme prompts than Dr. GRPO does
    p = np.r_[np.full(10, 0.05), np.full(10, 0.5)]
    assert float(T.mass_share(p, 0, 0.1, "grpo")) > float(T.mass_share(p, 0, 0.1, "dr_grpo"))


# --- expected signal and the budget allocator ----------------------------------------------------


def test_expected_signal_values():
    p, G = np.array([0.0, 0.3, 0.3, 0.3, 1.0]), np.array([4, 0, 1, 5, 4])
    np.testing.assert_allclose(
        T.expected_signal(p, G, "grpo"), T.expected_sigma(p, G.clip(1)) * (G > 0)
    )
    np.testing.assert_allclose(T.expected_signal(p, G, "dr_grpo"), [0, 0, 0, 0.21 * 0.8, 0])
    np.testing.assert_allclose(
        T.expected_signal(p, G, "nonsilent"), [0, 0, 0, 1 - 0.3**5 - 0.7**5, 0]
    )


@pytest.mark.parametrize("signal", T.SIGNALS)
def test_expected_signal_is_concave_in_g(signal):
    """Gains f(G+1) - f(G) never increase for G >= 1: what makes the top-entries allocator exact."""
    p = np.r_[1e-4, 1e-3, np.linspace(0.01, 0.99, 50), 0.999][:, None]
    f = T.expected_signal(p, np.arange(1, 300)[None, :], signal)  # (53, 299)
    assert (np.diff(f, 2, axis=1) <= 1e-14).all()
    assert (np.diff(f, axis=1) >= 0).all()


def brute_force_best(p, budget, signal, g_min, g_max):
    """Max total signal over every allocation with G_j in [g_min, g_max], sum <= budget."""
    f = T.expected_signal(p[:, None], np.arange(g_max + 1)[None, :], signal)  # (J, g_max + 1)
    best = -1.0
    for alloc in itertools.product(range(g_min, g_max + 1), repeat=p.size):
        if sum(alloc) <= budget:
            best = max(best, sum(f[j, g] for j, g in enumerate(alloc)))
    return best, f


@pytest.mark.parametrize("signal", T.SIGNALS)
@pytest.mark.parametrize("seed", range(4))
def test_allocator_matches_brute_force(signal, seed):
    rng = np.random.default_rng(seed)
    J = 3 + seed % 2
    p = rng.choice([0.02, 0.1, 0.3, 0.5, 0.5, 0.75, 0.97], size=J)
    g_min, g_max = 2, 6 + seed % 2
    for budget in range(g_min * J, g_max * J + 3):
        got = T.allocate_budget(p, budget, signal, g_min=g_min, g_max=g_max)
        assert got.sum() <= budget
        assert ((got >= g_min) & (got <= g_max)).all()
        best, f = brute_force_best(p, budget, signal, g_min, g_max)
        assert f[np.arange(J), got].sum() == pytest.approx(best, rel=1e-12, abs=1e-15)


def test_allocator_skips_unanimous_prompts():
    p = np.array([0.0, 0.4, 1.0, 0.1])
    got = T.allocate_budget(p, 20, "grpo", g_min=2, g_max=8)
    assert got[0] == got[2] == 0
    assert got.sum() <= 20 and (got[[1, 3]] >= 2).all()
    kept = T.allocate_budget(p, 20, "grpo", g_min=2, g_max=8, skip_unanimous=False)
    assert kept[0] == kept[2] == 2  # funded at g_min, never topped up: their gain is zero
    assert kept.sum() <= 20
    np.testing.assert_array_equal(T.allocate_budget([0.0, 1.0], 50, "nonsilent"), [0, 0])


def test_allocator_budget_shortage():
    p = np.array([0.05, 0.5, 0.3, 0.0, 0.45])
    # 4 prompts to fund at g_min = 4 but only 2 fit: the two with the largest f(4) = 1 - p^4 - q^4
    # (0.875 at p = 0.5, 0.867 at 0.45); the leftover 1 goes to the larger gain f(5) - f(4):
    # 0.0638 at p = 0.45 beats 1/16 at p = 0.5
    got = T.allocate_budget(p, 9, "nonsilent", g_min=4, g_max=8)
    np.testing.assert_array_equal(got, [0, 4, 0, 0, 5])
    # ties in f(g_min) go to the lower index
    np.testing.assert_array_equal(T.allocate_budget([0.3, 0.7, 0.3], 4, "dr_grpo"), [2, 2, 0])
    np.testing.assert_array_equal(T.allocate_budget(p, 3, "grpo", g_min=4), np.zeros(5))


def test_allocator_large_budget_saturates():
    p = np.array([0.2, 0.5, 0.9])
    np.testing.assert_array_equal(T.allocate_budget(p, 10_000, "dr_grpo", g_max=16), [16] * 3)
    np.testing.assert_array_equal(T.allocate_budget(p, 12, "grpo", g_min=4, g_max=4), [4] * 3)


# --- symmetry (hypothesis) -----------------------------------------------------------------------

# q in [1/2, 1] makes p = 1 - q exact (Sterbenz), so p + q == 1 and the check is about the math,
# not about 1 - (1 - p) != p in floating point
upper = st.floats(0.5, 1.0, allow_nan=False)
sizes = st.integers(1, 200)


@settings(max_examples=80, deadline=None)
@given(q=upper, G=sizes)
def test_silent_rate_and_expected_sigma_symmetric(q, G):
    p = 1 - q
    assert float(T.silent_rate(p, G)) == pytest.approx(float(T.silent_rate(q, G)), rel=1e-12)
    assert float(T.expected_sigma(p, G)) == pytest.approx(
        float(T.expected_sigma(q, G)), rel=1e-9, abs=1e-300
    )


@settings(max_examples=50, deadline=None)
@given(q=st.floats(0.5, 0.99), eps=st.sampled_from([0.2, 0.1, 0.05, 0.01]))
def test_group_size_exact_symmetric(q, eps):
    p = 1 - q
    g = int(T.group_size_exact(p, eps))
    assert g == int(T.group_size_exact(q, eps))
    assert float(T.fidelity(p, g)) >= 1 - eps > float(T.fidelity(p, g - 1))


# --- bad input -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: T.silent_rate(1.2, 8), r"p must lie in \[0, 1\]"),
        (lambda: T.expected_sigma(-0.1, 8), r"p must lie"),
        (lambda: T.fidelity(np.nan, 8), "NaN"),
        (lambda: T.expected_sigma(0.5, 0), "G must be integers >= 1"),
        (lambda: T.silent_rate(0.5, 2.5), "G must be integers"),
        (lambda: T.expected_sigma("a", 4), "p must be numeric"),
        (lambda: T.group_sigma(5, 4), "k must not exceed G"),
        (lambda: T.silent_rate_without_replacement(5, 4, 2), "c .* must not exceed n"),
        (lambda: T.silent_rate_without_replacement(2, 4, 5), "G must not exceed n"),
        (lambda: T.group_size_closed_form(0.5, 0.0), "eps must lie strictly between 0 and 1"),
        (lambda: T.group_size_exact(0.5, 1.0), "eps must lie strictly"),
        (lambda: T.group_size_exact(0.5, 0.1, g_max=0), "g_max must be integers >= 1"),
        (lambda: T.group_size_for_silent_rate(0.5, 0.0), "delta must lie strictly"),
        (lambda: T.round_group_size(5.0, "floor"), "valid: nearest, ceil"),
        (lambda: T.round_group_size(-1.0), "g must be >= 0"),
        (lambda: T.difficulty_weight(0.5, "dapo"), "valid: grpo, dr_grpo"),
        (lambda: T.mass_share([0.5], 0.6, 0.4, "grpo"), "lo must not exceed hi"),
        (lambda: T.mass_share([0.5], 0, 1, "grpo", closed="open"), "valid: both, neither"),
        (lambda: T.expected_signal(0.5, 4, "dapo"), "valid: grpo, dr_grpo, nonsilent"),
        (lambda: T.expected_signal(0.5, -1, "grpo"), "G must be integers >= 0"),
        (lambda: T.allocate_budget([[0.5]], 8, "grpo"), "p must be 1-D"),
        (lambda: T.allocate_budget([0.5], -1, "grpo"), "budget must be integers >= 0"),
        (lambda: T.allocate_budget([0.5], 8, "grpo", g_min=4, g_max=2), "g_max .* >= g_min"),
    ],
)
def test_bad_input_raises_value_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()
