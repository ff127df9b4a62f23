"""core.estimator_mass.whitened_tail_drift: what the mutation run of the whitened drift left open
(issue 48): each refusal word for word, the bounds of q and the core length, L_max = 1."""

from __future__ import annotations

import re

import numpy as np
import pytest

from grpo_dial.core.estimator_mass import whitened_tail_drift

BASE = dict(p=0.3, q_wrong=0.6, q_correct=0.4, core_length=4, group_size=4)
Q_LINE = "q_wrong and q_correct must lie in (0, 1) and core_length be > 0"


def _drift(**kw):
    return whitened_tail_drift(**{**BASE, **kw})


REFUSALS = [
    (dict(p="a"), "p must be numeric, got 'a'"),
    (dict(p=2.0), "p must lie in [0, 1] (no NaN)"),
    (dict(awareness="a"), "awareness must be numeric, got 'a'"),
    (dict(awareness=-0.5), "awareness must lie in [0, 1] (no NaN)"),
    (dict(q_wrong=0.0), Q_LINE),
    (dict(q_correct=0.0), Q_LINE),
    (dict(q_correct=1.0), Q_LINE),
    (dict(core_length=0.0), Q_LINE),
    (dict(group_size=1), "group_size must be an integer >= 2, got 1"),
    (dict(baseline="x"), "baseline='x' is not valid; choose one of 'mean', 'none'"),
]


@pytest.mark.parametrize(("kw", "message"), REFUSALS)
def test_refusals_word_for_word(kw, message):
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        _drift(**kw)


def test_the_constant_normalizer_at_the_smallest_bounds():
    # under 'constant' neither the advantage nor a unit shift moves a tail in expectation: 0, also
    # at L_max = 1 and a core of one token (both valid), and with the core length as text
    for kw in (dict(max_length=1.0, core_length=1), dict(max_length=1.0, core_length="4")):
        got = _drift(length_norm="constant", **kw)
        assert float(got.wrong) == 0.0 and float(got.correct) == 0.0
    got = _drift(length_norm="constant", max_length=100, core_length=["4", "6"])
    np.testing.assert_array_equal(got.wrong, [0.0, 0.0])
