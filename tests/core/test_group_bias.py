"""Tests for grpo_dial.core.group_bias: Monte Carlo groups, the closed-form formulas, symmetry,
limits, HA-DW's direction and bad inputs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grpo_dial.core import group_bias as B

N_GROUPS = 400_000
CASES = [(p, G) for p in (0.05, 0.3, 0.5, 0.9) for G in (2, 4, 8, 16)]
Z = 4.5  # standard errors; with ~100 seeded comparisons a 4.5-sigma miss is a real disagreement


def simulate(p: float, G: int, anchor: float = 0.5, seed: int = 0) -> dict[str, np.ndarray]:
    """Per non-degenerate group: the baseline k/G and, for response 0, its reward, plain advantage
    and HA-DW-weighted advantage, from a full (N, G) matrix of Bernoulli(p) rewards."""
    rng = np.random.default_rng([seed, G, int(round(p * 1000))])
    r = (rng.random((N_GROUPS, G)) < p).astype(float)  # (N, G)
    k = r.sum(1)
    keep = (k > 0) & (k < G)
    r, p_hat = r[keep], k[keep] / G
    adv = r[:, 0] - p_hat
    phi = np.exp(-np.sign(adv) * (p_hat - anchor))
    return {"p_hat": p_hat, "r0": r[:, 0], "adv": adv, "hadw": phi * adv, "n": keep.size}


def assert_mc(samples: np.ndarray, expected: float) -> None:
    """Mean within Z standard errors of the sample (plus float noise, for zero-variance cases
    such as G = 2, where every non-degenerate group has p_hat = 1/2)."""
    se = samples.std(ddof=1) / np.sqrt(samples.size)
    assert abs(samples.mean() - expected) <= Z * se + 1e-12, (samples.mean(), expected, se)


# --- Monte Carlo ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("p", "G"), CASES)
def test_closed_forms_match_monte_carlo(p, G):
    mc = simulate(p, G)
    kept = mc["p_hat"].size
    frac, expected_frac = kept / mc["n"], float(B.nondegenerate_probability(p, G))
    assert abs(frac - expected_frac) <= Z * np.sqrt(expected_frac * (1 - expected_frac) / mc["n"])
    assert_mc(mc["p_hat"], float(B.nondegenerate_baseline(p, G)))
    assert_mc(mc["p_hat"] - p, float(B.baseline_bias(p, G)))
    correct = mc["r0"] == 1
    assert_mc(mc["adv"][correct], float(B.conditional_advantage(p, G, True)))
    assert_mc(mc["adv"][~correct], float(B.conditional_advantage(p, G, False)))
    assert_mc(mc["hadw"][correct], float(B.hadw_conditional_advantage(p, G, True, 0.5)))
    assert_mc(mc["hadw"][~correct], float(B.hadw_conditional_advantage(p, G, False, 0.5)))


def test_hadw_with_the_true_rate_as_anchor_matches_monte_carlo():
    mc = simulate(0.1, 8, anchor=0.1, seed=1)
    correct = mc["r0"] == 1
    assert_mc(mc["hadw"][correct], float(B.hadw_conditional_advantage(0.1, 8, True, 0.1)))
    assert_mc(mc["hadw"][~correct], float(B.hadw_conditional_advantage(0.1, 8, False, 0.1)))


# --- the exact sums against the closed-form formulas --------------------------------------------

GRID = np.linspace(0.01, 0.99, 99)


@pytest.mark.parametrize("G", [2, 3, 4, 8, 16, 32, 64])
def test_exact_sums_equal_the_closed_form_formulas(G):
    p, n = GRID, G - 1
    nondeg = 1 - p**G - (1 - p) ** G
    np.testing.assert_allclose(B.nondegenerate_probability(p, G), nondeg, rtol=1e-12)
    np.testing.assert_allclose(B.nondegenerate_baseline(p, G), (p - p**G) / nondeg, rtol=1e-11)
    below = n * (p - p**n) / (1 - p**n)  # E[k' | k' < n]
    above = n * p / (1 - (1 - p) ** n)  # E[k' | k' > 0]
    np.testing.assert_allclose(B.conditional_advantage(p, G, True), 1 - (1 + below) / G, rtol=1e-11)
    np.testing.assert_allclose(B.conditional_advantage(p, G, False), -above / G, rtol=1e-11)


def test_hadw_sum_equals_a_loop_over_counts():
    from math import comb, exp

    p, G, C, s = 0.27, 6, 0.4, 1.3
    n = G - 1
    pmf = [comb(n, j) * p**j * (1 - p) ** (n - j) for j in range(n + 1)]
    num_c = sum(pmf[j] * s * exp(C - (1 + j) / G) * (1 - (1 + j) / G) for j in range(n))
    num_w = sum(pmf[j] * s * exp(j / G - C) * (-j / G) for j in range(1, n + 1))
    assert B.hadw_conditional_advantage(p, G, True, C, s) == pytest.approx(num_c / sum(pmf[:n]))
    assert B.hadw_conditional_advantage(p, G, False, C, s) == pytest.approx(num_w / sum(pmf[1:]))


def test_everything_broadcasts_and_keeps_shape():
    p = np.array([[0.1, 0.5], [0.7, 1.0]])
    for out in (
        B.nondegenerate_probability(p, 4),
        B.nondegenerate_baseline(p, 4),
        B.baseline_bias(p, 4),
        B.conditional_advantage(p, 4, True),
        B.true_advantage(p, False),
        B.hadw_conditional_advantage(p, 4, True, np.array([0.2, 0.8])),
    ):
        assert isinstance(out, np.ndarray) and out.shape == (2, 2)
    assert B.nondegenerate_baseline(0.3, 4).shape == ()
    anchors = np.array([0.2, 0.8])
    row = B.hadw_conditional_advantage(0.3, 4, True, anchors)
    assert row[0] == pytest.approx(B.hadw_conditional_advantage(0.3, 4, True, 0.2))


# --- signs, symmetry, limits ---------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(p=st.floats(0.0, 1.0), G=st.integers(2, 64))
def test_bias_sign_and_antisymmetry(p, G):
    b, b_mirror = float(B.baseline_bias(p, G)), float(B.baseline_bias(1 - p, G))
    assert b == pytest.approx(-b_mirror, abs=1e-12)
    if p < 0.5 - 1e-9:
        assert b > 0
    elif p > 0.5 + 1e-9:
        assert b < 0
    assert float(B.baseline_bias(0.5, G)) == pytest.approx(0, abs=1e-14)


@settings(max_examples=200, deadline=None)
@given(p=st.floats(0.0, 1.0), G=st.integers(2, 64), C=st.floats(0.0, 1.0))
def test_flipping_the_rewards_mirrors_the_advantages(p, G, C):
    """r -> 1 - r maps p -> 1-p, p_hat -> 1 - p_hat, A -> -A; Phi is unchanged if also C -> 1-C."""
    assert float(B.conditional_advantage(1 - p, G, True)) == pytest.approx(
        -float(B.conditional_advantage(p, G, False)), abs=1e-12
    )
    assert float(B.hadw_conditional_advantage(1 - p, G, True, 1 - C)) == pytest.approx(
        -float(B.hadw_conditional_advantage(p, G, False, C)), abs=1e-12
    )


@settings(max_examples=100, deadline=None)
@given(p=st.floats(0.0, 0.49), G=st.integers(2, 64))
def test_a_correct_answer_on_a_hard_prompt_gets_too_small_an_advantage(p, G):
    assert float(B.conditional_advantage(p, G, True)) < float(B.true_advantage(p, True))


@pytest.mark.parametrize("G", [2, 3, 8, 32, 200])
def test_limits_at_the_unanimous_ends(G):
    eps = np.array([1e-300, 1e-12, 1e-8])
    np.testing.assert_allclose(B.nondegenerate_baseline([0.0, *eps], G), 1 / G, rtol=1e-6)
    np.testing.assert_allclose(B.nondegenerate_baseline([1.0, *(1 - eps[1:])], G), 1 - 1 / G)
    np.testing.assert_allclose(B.conditional_advantage([0.0, *eps], G, True), 1 - 1 / G, rtol=1e-6)
    np.testing.assert_allclose(B.conditional_advantage([0.0, *eps], G, False), -1 / G, rtol=1e-6)
    np.testing.assert_allclose(B.conditional_advantage(1.0, G, True), 1 / G)
    np.testing.assert_allclose(B.conditional_advantage(1.0, G, False), -(1 - 1 / G))
    assert B.nondegenerate_probability([0.0, 1.0], G).tolist() == [0.0, 0.0]
    assert float(B.nondegenerate_probability(1e-12, G)) == pytest.approx(G * 1e-12, rel=1e-9)
    assert float(B.nondegenerate_probability(1 - 1e-12, G)) == pytest.approx(G * 1e-12, rel=1e-3)
    with np.errstate(all="raise"):  # no warnings at the ends
        B.hadw_conditional_advantage([0.0, 1.0], G, True, 0.5)


def test_hadw_direction_and_the_true_rate_as_anchor():
    p, G = 0.1, 8
    plain = float(B.conditional_advantage(p, G, True))
    truth = 1 - p
    at_half = float(B.hadw_conditional_advantage(p, G, True, 0.5))
    at_p = float(B.hadw_conditional_advantage(p, G, True, p))
    # a hard prompt under anchor 0.5: the correct answer's advantage is scaled up (here past 1-p)
    assert plain < truth < at_half
    # anchor C = p: a correct response makes p_hat >= 1/G = 0.125 > C in every non-degenerate
    # group, so Phi = e^(C - p_hat) < 1 and HA-DW moves E[A | correct] AWAY from 1 - p
    assert at_p < plain < truth
    assert plain == pytest.approx(0.787500, abs=1e-6)
    assert at_p == pytest.approx(0.715473, abs=1e-6)
    assert at_half == pytest.approx(1.067361, abs=1e-6)
    # the scale multiplies through
    assert float(B.hadw_conditional_advantage(p, G, True, 0.5, 2.0)) == pytest.approx(2 * at_half)


def test_hadw_weight_follows_the_sign_rule():
    # hard prompt (p_hat < C): correct scaled up by e^M, wrong scaled down; easy: the reverse
    assert B.hadw_weight(0.2, 0.8, 0.5) == pytest.approx(np.exp(0.3))
    assert B.hadw_weight(0.2, -0.2, 0.5) == pytest.approx(np.exp(-0.3))
    assert B.hadw_weight(0.8, 0.2, 0.5) == pytest.approx(np.exp(-0.3))
    assert B.hadw_weight(0.8, -0.8, 0.5, scale=2) == pytest.approx(2 * np.exp(0.3))


# --- bad inputs ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: B.nondegenerate_baseline(1.2, 4), "p"),
        (lambda: B.nondegenerate_baseline(-0.1, 4), "p"),
        (lambda: B.nondegenerate_baseline(np.nan, 4), "p"),
        (lambda: B.nondegenerate_probability(np.inf, 4), "p"),
        (lambda: B.baseline_bias("x", 4), "p"),
        (lambda: B.nondegenerate_baseline(0.3, 1), "G"),
        (lambda: B.nondegenerate_baseline(0.3, 2.5), "G"),
        (lambda: B.nondegenerate_baseline(0.3, [4, 8]), "G"),
        (lambda: B.nondegenerate_baseline(0.3, True), "G"),
        (lambda: B.conditional_advantage(0.3, 4, 1), "correct"),
        (lambda: B.true_advantage(0.3, "yes"), "correct"),
        (lambda: B.hadw_conditional_advantage(0.3, 4, True, 1.5), "anchor"),
        (lambda: B.hadw_conditional_advantage(0.3, 4, True, np.nan), "anchor"),
        (lambda: B.hadw_conditional_advantage(0.3, 4, True, 0.5, 0.0), "scale"),
        (lambda: B.hadw_conditional_advantage(0.3, 4, True, 0.5, np.inf), "scale"),
        (lambda: B.hadw_weight(0.3, 0.1, 0.5, scale=-1), "scale"),
    ],
)
def test_bad_inputs_raise_one_line_naming_the_argument(call, name):
    with pytest.raises(ValueError, match=rf"^{name} ") as info:
        call()
    assert "\n" not in str(info.value)
