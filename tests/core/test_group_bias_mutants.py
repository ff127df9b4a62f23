"""core.group_bias: the true advantage by hand, refusals naming their argument, and the exact
ends p = 0, 1 computed without a numpy warning."""

import warnings

import numpy as np
import pytest

from grpo_dial.core.group_bias import conditional_advantage, hadw_weight, true_advantage


def test_true_advantage_by_hand():
    np.testing.assert_allclose(true_advantage([0.25, 0.6], True), [0.75, 0.4])
    np.testing.assert_allclose(true_advantage([0.25, 0.6], False), [-0.25, -0.6])


def test_refusals_name_their_argument():
    with pytest.raises(ValueError, match=r"^p must lie in \[0, 1\]"):
        true_advantage(1.5, True)
    with pytest.raises(ValueError, match=r"^anchor must lie in \[0, 1\]"):
        hadw_weight(0.5, 1.0, 2.0)


def test_the_ends_are_exact_and_silent():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = conditional_advantage([0.0, 1.0], 4, True)
    np.testing.assert_allclose(got, [1 - 1 / 4, 1 / 4])
