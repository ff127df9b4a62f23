"""core/length_drift.tail_drift's per-response mean at G = 2 by hand, every std knob at a value
that changes it: the only informative group has k = 1, sigma = 1/2, sigma_d = sqrt(1/2 / (2 -
ddof)), so Sigma = P(k = 1) sigma^2 / (sigma_d + eps)^alpha, with DAPO's redraws multiplying
P(k = 1) by 1 + s + ... + s^R (s = p^2 + (1 - p)^2); E[u_w] = -a Sigma h(q_w, c),
E[u_c] = a Sigma h(q_c, c), h(q, c) = sum_t (1 - q) q^t ((1 - q) t - q) / (c + t)."""

from __future__ import annotations

import numpy as np
import pytest

from grpo_dial.core.length_drift import tail_drift

P, QW, QC, C, A = 0.3, 0.8, 0.4, 3, 0.6


def _h(q: float, c: float) -> float:
    t = np.arange(5000)
    return float(np.sum((1 - q) * q**t * ((1 - q) * t - q) / (c + t)))


@pytest.mark.parametrize(
    ("knobs", "sigma_moment"),
    [
        ({}, 0.42 * 0.25 / 0.5),  # P(k = 1) = 2 p (1 - p) = 0.42
        ({"eps": 0.1}, 0.42 * 0.25 / 0.6),
        ({"ddof": 1, "eps": 0.1}, 0.42 * 0.25 / (np.sqrt(0.5) + 0.1)),
        ({"std_power": 0.5, "ddof": 1}, 0.42 * 0.25 / np.sqrt(np.sqrt(0.5))),
        ({"silent": "drop", "max_resample_rounds": 2}, 0.42 * (1 + 0.58 + 0.58**2) * 0.25 / 0.5),
    ],
)
def test_the_sequence_drift_by_hand(knobs, sigma_moment):
    d = tail_drift(P, QW, QC, C, 2, length_norm="sequence", awareness=A, **knobs)
    assert float(d.wrong) == pytest.approx(-A * sigma_moment * _h(QW, C), rel=1e-10)
    assert float(d.correct) == pytest.approx(A * sigma_moment * _h(QC, C), rel=1e-10)


def test_a_group_scope_ignores_n_groups():
    one = tail_drift(P, QW, QC, C, 4, length_norm="token", awareness=A)
    many = tail_drift(P, QW, QC, C, 4, length_norm="token", awareness=A, n_groups=16)
    assert float(many.wrong) == float(one.wrong) and float(many.correct) == float(one.correct)
    batch = tail_drift(P, QW, QC, C, 4, length_norm="token", awareness=A, scope="batch",
                       n_groups=16)  # fmt: skip
    assert 0 < float(batch.wrong) < float(one.wrong) / 8  # ~1/16 of it: more tokens pooled
