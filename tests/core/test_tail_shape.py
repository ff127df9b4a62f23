"""The push on a tail of any shape (core/tail_shape.py) against the geometric closed form and
against finite differences of the hazard model it assumes."""

from __future__ import annotations

import numpy as np
import pytest

from grpo_dial.core.length_drift import inverse_length_covariance, tail_score
from grpo_dial.core.tail_shape import (
    empirical_pmf,
    geometric_pmf,
    hazards,
    tail_push,
    tail_scores,
)


def _hazard_pmf(logits: np.ndarray, theta: float) -> np.ndarray:
    """P(T = t) of continue probabilities sigmoid(b_t + theta), stopping for sure after the last."""
    q = 1 / (1 + np.exp(-(logits + theta)))
    q[-1] = 0.0
    alive = np.concatenate([[1.0], np.cumprod(q)[:-1]])
    return alive * (1 - q)


@pytest.mark.parametrize(("mean", "core"), [(3.29, 5.5), (0.4, 2.0), (8.0, 12.0)])
def test_a_geometric_tail_gives_the_closed_forms_h_and_its_mean_as_slope(mean, core):
    p = geometric_pmf(mean, 2000)  # the cut's mass q^2000 is below 1e-80 at these means
    q = mean / (1 + mean)
    h, slope = tail_push(p, core)
    assert h == pytest.approx(float(inverse_length_covariance(q, core)), rel=1e-9)
    assert slope == pytest.approx(mean, rel=1e-9)  # dE[T]/dtheta = e^theta = E[T]
    t = np.arange(50)
    assert tail_scores(p)[:50] == pytest.approx(tail_score(t, q), abs=1e-12)
    assert hazards(p)[:50] == pytest.approx(np.full(50, q))


def test_any_tail_push_is_the_derivative_of_its_hazard_model():
    """Hazards rising then falling (a non-geometric tail): h and slope equal the central finite
    differences of E[1 / (c + T)] and E[T] in theta, the score identity by another road."""
    rng = np.random.default_rng(7)
    b = rng.normal(0.5, 1.0, 40)
    c, eps = 4.5, 1e-6
    p = _hazard_pmf(b, 0.0)
    assert hazards(p)[:-1] == pytest.approx(1 / (1 + np.exp(-b[:-1])), rel=1e-9)
    t = np.arange(p.size)
    up, down = _hazard_pmf(b, eps), _hazard_pmf(b, -eps)
    dh = (np.sum(up / (c + t)) - np.sum(down / (c + t))) / (2 * eps)
    dslope = (np.sum(up * t) - np.sum(down * t)) / (2 * eps)
    h, slope = tail_push(p, c)
    assert h == pytest.approx(dh, rel=1e-6) and slope == pytest.approx(dslope, rel=1e-6)
    assert np.sum(p * tail_scores(p)) == pytest.approx(0.0, abs=1e-12)  # E[s] = 0
    assert h < 0 < slope  # longer tails, smaller 1/|o|: the push's sign holds for any shape


def test_a_tail_with_fewer_zeros_than_the_geometric_gets_a_smaller_push():
    """By hand: P(T = 0) = 0, T = 1 or 2 with 1/2 each, core 1: q_0 = 1, q_1 = 1/2, q_2 = 0;
    s(1) = 0 - 1/2, s(2) = 1/2 - 0; h = (1/2)(-1/2)/2 + (1/2)(1/2)/3 = -1/24; slope = 1/4."""
    h, slope = tail_push([0.0, 0.5, 0.5], 1.0)
    assert h == pytest.approx(-1 / 24) and slope == pytest.approx(0.25)
    assert tail_scores([0.0, 0.5, 0.5]).tolist() == pytest.approx([-1.0, -0.5, 0.5])
    assert empirical_pmf([2, 1, 1, 2]).tolist() == [0.0, 0.5, 0.5]


@pytest.mark.parametrize(
    ("call", "match"),
    [(lambda: tail_push([0.5, 0.6], 1.0), "summing to 1"),
     (lambda: tail_push([[1.0]], 1.0), "1-D array"),
     (lambda: tail_push([1.0], 0.0), "core length must be > 0"),
     (lambda: geometric_pmf(0.0, 5), "mean > 0"),
     (lambda: empirical_pmf([1.5]), "whole numbers"),
     (lambda: empirical_pmf([]), "whole numbers")],
)  # fmt: skip
def test_bad_tails_are_refused_in_one_line(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_the_edges_of_a_tail_distribution_by_hand():
    import warnings

    assert geometric_pmf(1.0, 3).tolist() == [0.5, 0.25, 0.125, 0.125]  # q = 1/2, the rest at 3
    assert geometric_pmf(1.0, 1).tolist() == [0.5, 0.5]
    assert tail_push([1.0], 2.0) == (0.0, 0.0)  # always empty: nothing to push
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no division warning past the last length
        assert hazards([0.5, 0.5, 0.0]).tolist() == [0.5, 0.0, 0.0]
    assert empirical_pmf([0, 0, 1]).tolist() == pytest.approx([2 / 3, 1 / 3])
    with pytest.raises(ValueError, match="finite probabilities >= 0"):
        tail_push([-0.5, 1.5], 1.0)  # sums to 1 but has a negative entry
    with pytest.raises(ValueError, match="finite probabilities >= 0"):
        tail_push([0.5, 0.5 + 1e-7], 1.0)  # off by more than 1e-9
    with pytest.raises(ValueError, match=r"^tail lengths are whole numbers >= 0, at least one$"):
        empirical_pmf([-1, 2])
