"""The aware task's numbers (data/tasks/aware.py) off the symmetric defaults, by Bayes' rule by
hand: the pass rate and P(~ | wrong), P(~ | correct) at estimate_rate 0.3, a config's options
read the same way, the tail_mean range, and tasks that are never wrong or never right."""

from __future__ import annotations

import math

import pytest

from grpo_dial.data.tasks.aware import AwareTask, options_awareness

SKEW = {"estimate_rate": 0.3, "compute_accuracy": 0.9, "estimate_accuracy": 0.1}


def test_awareness_off_the_symmetric_point_by_hand():
    # p = 0.3 x 0.1 + 0.7 x 0.9 = 0.66; P(wrong and ~) = 0.3 x 0.9 = 0.27 of P(wrong) = 0.34;
    # P(right and ~) = 0.3 x 0.1 = 0.03 of 0.66
    for a in (AwareTask(**SKEW).awareness(), options_awareness(SKEW)):
        assert a.p == pytest.approx(0.66)
        assert a.pi_wrong == pytest.approx(0.27 / 0.34)
        assert a.pi_correct == pytest.approx(0.03 / 0.66)
        assert a.awareness == pytest.approx(0.27 / 0.34 - 0.03 / 0.66)
        assert not a.symmetric  # pi_0 + pi_1 = 0.84, not 1
    assert options_awareness({}).awareness == pytest.approx(0.6)  # the defaults


def test_a_task_never_wrong_or_never_right_leaves_that_share_undefined():
    a = AwareTask(compute_accuracy=1.0, estimate_accuracy=1.0).awareness()
    assert a.p == 1.0 and math.isnan(a.pi_wrong) and a.pi_correct == pytest.approx(0.5)
    a = AwareTask(compute_accuracy=0.0, estimate_accuracy=0.0).awareness()
    assert a.p == 0.0 and a.pi_wrong == pytest.approx(0.5) and math.isnan(a.pi_correct)


def test_tail_mean_range():
    assert AwareTask(tail_mean=64).tail_mean == 64
    for bad in (64.5, -0.1, True):
        with pytest.raises(ValueError, match="tail_mean must be a number in \\[0, 64\\]"):
            AwareTask(tail_mean=bad)
