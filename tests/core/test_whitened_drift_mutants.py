"""whitened_tail_drift's domain and refusals, each word for word (the full mutation run's
survivors of the whitened drift, issue 48)."""

from __future__ import annotations

import numpy as np
import pytest

from grpo_dial.core.estimator_mass import whitened_tail_drift

BASE = {"p": 0.3, "q_wrong": 0.5, "q_correct": 0.4, "core_length": 3.0, "group_size": 4}
OPEN = "q_wrong and q_correct must lie in (0, 1) and core_length be > 0"


@pytest.mark.parametrize(("change", "message"), [
    ({"p": 1.5}, "p must lie in [0, 1] (no NaN)"),
    ({"awareness": 2.0}, "awareness must lie in [0, 1] (no NaN)"),
    ({"q_wrong": 0.0}, OPEN),
    ({"q_correct": 0.0}, OPEN),
    ({"q_correct": 1.0}, OPEN),
    ({"q_wrong": 1.0}, OPEN),
    ({"core_length": 0.0}, OPEN),
    ({"group_size": 1}, "group_size must be an integer >= 2, got 1"),
    ({"baseline": "x"}, "baseline='x' is not valid; choose one of 'mean', 'none'"),
])  # fmt: skip
def test_each_refusal_word_for_word(change, message):
    with pytest.raises(ValueError) as err:
        whitened_tail_drift(**{**BASE, **change})
    assert str(err.value) == message


def test_the_domain_edges_that_are_inside():
    # a one-token core is a core (tails after it are all the length there is)
    one = whitened_tail_drift(**{**BASE, "core_length": 1.0})
    assert np.isfinite(one.wrong) and np.isfinite(one.correct)
    # the constant normalizer takes any L_max > 0, below 1 too, and moves no tail
    flat = whitened_tail_drift(**BASE, length_norm="constant", max_length=0.5)
    assert (float(flat.wrong), float(flat.correct)) == (0.0, 0.0)
