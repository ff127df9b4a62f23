"""core.theory: hand numbers and one-line refusals the other tests leave open."""

import warnings

import numpy as np
import pytest

from grpo_dial.core.theory import (
    allocate_budget,
    difficulty_weight,
    expected_sigma_power,
    fidelity_expansion,
    group_sigma,
    mass_share,
)


def test_expected_sigma_power_by_hand():
    # G = 2: sigma is 1/2 at k = 1 (prob 2 p (1-p)), 0 otherwise.
    p = np.array([0.3, 0.5])
    np.testing.assert_allclose(expected_sigma_power(p, 2, 1.0), 2 * p * (1 - p) * 0.5)
    np.testing.assert_allclose(expected_sigma_power(p, 2, 2.0), 2 * p * (1 - p) * 0.25)
    # G = 3, p = 0.2: k = 1 and 2 both have sigma sqrt(2)/3
    want = (3 * 0.2 * 0.8**2 + 3 * 0.2**2 * 0.8) * np.sqrt(2) / 3
    np.testing.assert_allclose(expected_sigma_power(np.array([0.2]), 3, 1.0), [want])


def test_fidelity_expansion_is_minus_inf_at_the_ends_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = fidelity_expansion([0.0, 0.5], 4)
    assert got[0] == -np.inf and got[1] == pytest.approx(1 - 1 / (8 * 4 * 0.25))


def test_refusals_name_their_argument():
    with pytest.raises(ValueError, match="^G must be integers >= 1"):
        fidelity_expansion(0.5, 0)
    with pytest.raises(ValueError, match="^k must be integers >= 0"):
        group_sigma(-1, 4)
    with pytest.raises(ValueError, match="^lo must not contain NaN"):
        mass_share([0.5], float("nan"), 1.0, "grpo")
    with pytest.raises(ValueError, match="^unknown recipe 'x'; valid: "):
        difficulty_weight(0.5, "x")


def test_allocate_budget_with_no_room_to_grow():
    # g_min == g_max: every funded prompt gets g_min, nothing is left to add
    got = allocate_budget([0.5, 0.2, 0.0], budget=8, signal="grpo", g_min=4, g_max=4)
    np.testing.assert_array_equal(got, [4, 4, 0])
