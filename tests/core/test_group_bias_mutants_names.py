"""core.group_bias: each function's refusal names its own argument, and the chance of a
non-degenerate group near p = 1 keeps its digits (it is computed on min(p, 1 - p))."""

import numpy as np
import pytest

from grpo_dial.core.group_bias import (
    conditional_advantage,
    hadw_conditional_advantage,
    hadw_weight,
    nondegenerate_probability,
)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: conditional_advantage(1.5, 4, True), "p must lie in [0, 1], got min 1.5 max 1.5"),
        (
            lambda: hadw_conditional_advantage(-0.5, 4, False, 0.3),
            "p must lie in [0, 1], got min -0.5 max -0.5",
        ),
        (lambda: hadw_weight(1.25, 1.0, 0.5), "p_hat must lie in [0, 1], got min 1.25 max 1.25"),
        (lambda: hadw_weight(0.5, np.nan, 0.5), "advantage must be finite (no NaN or inf)"),
    ],
)
def test_each_refusal_names_its_argument(call, message):
    with pytest.raises(ValueError) as error:
        call()
    assert str(error.value) == message


@pytest.mark.parametrize("q", [1e-9, 1e-7, 1e-12])
def test_nondegenerate_probability_near_one_keeps_its_digits(q):
    # 1 - p^4 - (1-p)^4 = 4q - 6q^2 + 4q^3 - 2q^4 with q = 1 - p (exact in float64)
    p = 1 - q
    q = 1 - p
    want = 4 * q - 6 * q**2 + 4 * q**3 - 2 * q**4
    assert nondegenerate_probability(p, 4) == pytest.approx(want, rel=1e-12, abs=0)
    assert nondegenerate_probability(q, 4) == pytest.approx(want, rel=1e-12, abs=0)
