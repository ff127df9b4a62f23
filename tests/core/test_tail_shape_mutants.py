"""core.tail_shape: a distribution given as exact fractions is read as floats (the hazards and
the push by hand)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from grpo_dial.core.tail_shape import hazards, tail_push, tail_scores


def test_a_tail_of_fractions_by_hand():
    # P = 1/4, 1/4, 1/2: S = 1, 3/4, 1/2, so q = 3/4, 2/3, 0 and s = -q + sum_{j<t} (1 - q_j)
    pmf = [Fraction(1, 4), Fraction(1, 4), Fraction(1, 2)]
    assert hazards(pmf).tolist() == pytest.approx([0.75, 2 / 3, 0.0], rel=1e-15)
    s = [-0.75, 0.25 - 2 / 3, 0.25 + 1 / 3]
    assert tail_scores(pmf).tolist() == pytest.approx(s, rel=1e-15)
    h, slope = tail_push(pmf, 2.0)
    assert h == pytest.approx(0.25 * s[0] / 2 + 0.25 * s[1] / 3 + 0.5 * s[2] / 4, rel=1e-14)
    assert slope == pytest.approx(0.25 * s[1] + 0.5 * 2 * s[2], rel=1e-14)
