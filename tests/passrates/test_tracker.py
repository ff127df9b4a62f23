"""Tests for grpo_dial.passrates.tracker: the prior, the decayed update and the running estimate."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from grpo_dial.passrates.tracker import (
    tracker_estimate,
    tracker_prior,
    tracker_unanimous,
    tracker_update,
)


def test_prior_from_table_caps_strength_and_skips_unlisted():
    table = pd.DataFrame(
        {"prompt_id": ["a", "b", "c"], "p_hat": [0.25, 0.0, 1.0], "n": [4, 32, 32]}
    )
    a, b = tracker_prior(["a", "b", "c", "zz"], table, prior_strength=8)
    assert a.tolist() == [1.0, 0.0, 8.0, 0.0] and b.tolist() == [3.0, 8.0, 0.0, 0.0]
    assert tracker_unanimous(a, b).tolist() == [False, True, True, False]
    est = tracker_estimate(a, b)
    assert est[3] == 0.5 and np.all((est > 0) & (est < 1))
    assert tracker_prior(["a"], None, 8)[0].tolist() == [0.0]
    with pytest.raises(ValueError, match="lacks column 'p_hat'"):
        tracker_prior(["a"], table.drop(columns="p_hat"), 8)


def test_update_decays_only_visited_prompts_and_counts_repeats():
    a, b = np.array([2.0, 1.0, 0.0]), np.array([2.0, 1.0, 3.0])
    a2, b2 = tracker_update(a, b, np.array([0, 0, 0, 2]), np.array([1, 0, 1, 0]), decay=0.5)
    assert a2.tolist() == [3.0, 1.0, 0.0] and b2.tolist() == [2.0, 1.0, 2.5]
    with pytest.raises(ValueError, match="decay"):
        tracker_update(a, b, np.array([0]), np.array([1]), decay=0.0)
    with pytest.raises(ValueError, match="out of range"):
        tracker_update(a, b, np.array([3]), np.array([1]), decay=1.0)


@pytest.mark.parametrize("p_true, decay", [(0.05, 1.0), (0.5, 1.0), (0.3, 0.9), (0.8, 0.95)])
def test_running_estimate_converges_to_the_true_pass_rate(p_true, decay):
    rng = np.random.default_rng(0)
    a, b = np.array([8 * 0.9]), np.array([8 * 0.1])  # a prior far from the truth
    history = []
    for _ in range(2000):
        correct = rng.random(8) < p_true
        a, b = tracker_update(a, b, np.zeros(8, np.int64), correct, decay)
        history.append(tracker_estimate(a, b)[0])
    late = np.array(history[500:])
    # decay 1: the posterior mean itself converges; decay < 1: an unbiased-in-the-limit
    # estimate whose time average converges and whose spread is ~ sqrt(p(1-p)(1-decay)/(8(1+d))).
    assert abs(late.mean() - p_true) < 0.01
    if decay == 1.0:
        assert abs(history[-1] - p_true) < 0.01
