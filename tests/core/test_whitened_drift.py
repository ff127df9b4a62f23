"""The length drift of REINFORCE++'s whitening over tokens (core.estimator_mass.
whitened_tail_drift) against a Monte Carlo through the dial's own whitened advantages
(core.advantage.advantages, whiten 'token', with the responses' lengths): batches of M groups
at a few pass rates, the update of each tail parameter under the sequence normalizer,
sum_i A_i s_i 1{i uses it} / (G |o_i|), and the constant one, / (G L_max), per pass rate."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from grpo_dial.core.advantage import advantages
from grpo_dial.core.dial import dial_from_config
from grpo_dial.core.estimator_mass import whitened_tail_drift
from grpo_dial.core.length_drift import inverse_length_covariance, tail_drift

L_MAX = 40.0


def monte_carlo(ps, qw, qc, c, G, a, baseline, norm, m=128, batches=300, seed=0):
    """(P, 2) mean and (P, 2) standard error of (u_w, u_c) per group, by pass rate."""
    rng = np.random.default_rng(seed)
    preset = "reinforce_pp_baseline" if baseline == "mean" else "reinforce_pp"
    dial = dial_from_config({"preset": preset, "std_ddof": 0})
    p = np.repeat(ps, m // len(ps))  # (M,) the batch's prompts, equally many at each p
    ids = torch.arange(p.size).repeat_interleave(G)
    out = np.zeros((batches, p.size, 2))
    for b in range(batches):
        r = (rng.random((p.size, G)) < p[:, None]).astype(float)
        uses_w = rng.random((p.size, G)) < np.where(r == 1, (1 - a) / 2, (1 + a) / 2)
        q = np.where(uses_w, qw, qc)
        t = rng.geometric(1 - q) - 1  # P(T = t) = (1 - q) q^t
        s = (1 - q) * t - q
        lengths = c + t
        n = torch.from_numpy(lengths.ravel())
        adv = advantages(torch.from_numpy(r.ravel()), ids, dial, lengths=n).numpy()
        adv = adv.reshape(p.size, G)
        w = 1 / (G * lengths) if norm == "sequence" else np.full(lengths.shape, 1 / (G * L_MAX))
        out[b, :, 0] = (adv * w * s * uses_w).sum(1)
        out[b, :, 1] = (adv * w * s * ~uses_w).sum(1)
    per = out.reshape(batches, len(ps), -1, 2)  # by pass rate
    samples = per.transpose(1, 0, 2, 3).reshape(len(ps), -1, 2)
    return samples.mean(1), samples.std(1, ddof=1) / np.sqrt(samples.shape[1])


@pytest.mark.parametrize(
    ("ps", "qw", "qc", "c", "G", "a", "baseline", "norm"),
    [
        ((0.3, 0.7), 0.8, 0.6, 5, 8, 1.0, "mean", "sequence"),  # wrong runs longer, aware
        ((0.2, 0.5), 0.5, 0.85, 3, 4, 0.6, "mean", "sequence"),  # correct runs longer
        ((0.4,), 0.8, 0.6, 5, 8, 1.0, "none", "sequence"),  # REINFORCE++, no baseline
        ((0.3, 0.7), 0.8, 0.6, 5, 8, 1.0, "mean", "constant"),  # no drift under L_max
        ((0.3, 0.7), 0.8, 0.6, 5, 8, 0.0, "mean", "sequence"),  # blind: 0
    ],
)
def test_whitened_drift_matches_monte_carlo(ps, qw, qc, c, G, a, baseline, norm):
    exact = whitened_tail_drift(np.array(ps), qw, qc, c, G, length_norm=norm, awareness=a,
                                baseline=baseline, max_length=L_MAX)  # fmt: skip
    mean, se = monte_carlo(np.array(ps), qw, qc, c, G, a, baseline, norm)
    want = np.stack([exact.wrong, exact.correct], axis=1)  # (P, 2)
    assert (np.abs(mean - want) < 4.5 * se + 0.02 * np.abs(want)).all(), (mean, want, se)
    if a == 0 or norm == "constant":
        assert np.abs(want).max() < 1e-15


def test_whitening_over_tokens_brakes_the_wrong_tail_under_the_sequence_normalizer():
    """Hand numbers at one prompt p = 0.5, G = 2, c = 4, aware, q_w = 0.5 / q_c = 0.2: T_w = 1,
    T_c = 0.25; N = (G-1) p(1-p)(T_c - T_w) = -0.1875, D = 2 (4 + 0.125 + 0.5) = 9.25;
    E k(2-k)^2 = E (2-k)k^2 = 0.5, Q = (4.25 x 0.5 + 5 x 0.5) / 4 = 1.15625."""
    out = whitened_tail_drift(0.5, 0.5, 0.2, 4, 2, awareness=1.0)
    mu = -0.1875 / 9.25
    sd = np.sqrt(1.15625 / 9.25 - mu**2 + 1e-8)
    hw, hc = (float(inverse_length_covariance(q, 4)) for q in (0.5, 0.2))
    # the mean baseline's drift: -a E[sigma^2] h_w, E[sigma^2] = p(1-p)(1 - 1/G) = 1/8
    base = tail_drift(0.5, 0.5, 0.2, 4, 2, std_power=0.0, length_norm="sequence", awareness=1.0)
    assert float(base.wrong) == pytest.approx(-0.125 * hw, rel=1e-12)
    # every wrong response uses theta_w, every correct one theta_c: P_w = P_c = 0.5
    assert float(out.wrong) == pytest.approx((-0.125 * hw - mu * 0.5 * hw) / sd, rel=1e-12)
    assert float(out.correct) == pytest.approx((0.125 * hc - mu * 0.5 * hc) / sd, rel=1e-12)
    assert 0 < float(out.wrong) < float(base.wrong) / sd  # pushed longer, less than unwhitened


def test_bad_input_names_it():
    with pytest.raises(ValueError, match="length_norm='token' is not valid"):
        whitened_tail_drift(0.5, 0.5, 0.5, 4, 8, length_norm="token")
    with pytest.raises(ValueError, match="needs max_length > 0"):
        whitened_tail_drift(0.5, 0.5, 0.5, 4, 8, length_norm="constant")
    with pytest.raises(ValueError, match="q_wrong and q_correct must lie in \\(0, 1\\)"):
        whitened_tail_drift(0.5, 1.0, 0.5, 4, 8)
