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
from grpo_dial.core.length_drift import (
    correct_tail_mean,
    inverse_length_covariance,
    sigma_moment,
    tail_drift,
    tail_mean,
    wrong_tail_mean,
)

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
        ((0.4,), 0.8, 0.6, 5, 8, 0.5, "none", "sequence"),  # half aware: both tails route
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


def monte_carlo_token(ps, qw, qc, c, G, a, baseline, m=128, batches=1500, seed=1):
    """(P, 2) mean and standard error of (u_w, u_c) per group under the token normalizer, w =
    M/S (S the batch's tokens), the dial's whitened advantages A_i: sum_i (A_i w - f_i) s_i on
    each tail, f_i the same whitened weight with |o_i| set to c + E[T_i] (from the batch's other
    lengths only, so E[f_i s_i] = 0 exactly: a control variate, not an approximation); and the
    raw sum_i A_i w s_i's (P, 2) mean and standard error."""
    rng = np.random.default_rng(seed)
    preset = "reinforce_pp_baseline" if baseline == "mean" else "reinforce_pp"
    dial = dial_from_config({"preset": preset, "std_ddof": 0})
    p = np.repeat(ps, m // len(ps))
    ids = torch.arange(p.size).repeat_interleave(G)
    et_w, et_c = float(tail_mean(qw)), float(tail_mean(qc))
    cv, raw = np.zeros((2, batches, p.size, 2))
    for b in range(batches):
        r = (rng.random((p.size, G)) < p[:, None]).astype(float)
        uses_w = rng.random((p.size, G)) < np.where(r == 1, (1 - a) / 2, (1 + a) / 2)
        q = np.where(uses_w, qw, qc)
        t = rng.geometric(1 - q) - 1
        s = (1 - q) * t - q
        lengths = c + t
        n = torch.from_numpy(lengths.ravel())
        adv = advantages(torch.from_numpy(r.ravel()), ids, dial, lengths=n).numpy()
        weight = adv.reshape(p.size, G) * m / lengths.sum()  # A_i w
        x = r - r.mean(1, keepdims=True) if baseline == "mean" else r  # a before whitening
        d = c + np.where(uses_w, et_w, et_c) - lengths  # |o_i| -> c + E[T_i]
        tot, s1, s2 = lengths.sum() + d, (lengths * x).sum() + d * x, (lengths * x**2).sum()
        s2 = s2 + d * x**2
        mu = s1 / tot
        f = (x - mu) / np.sqrt(s2 / tot - mu**2 + 1e-8) * m / tot
        for out, y in ((cv, (weight - f) * s), (raw, weight * s)):
            out[b, :, 0], out[b, :, 1] = (y * uses_w).sum(1), (y * ~uses_w).sum(1)
    res = []
    for out in (cv, raw):
        per = out.reshape(batches, len(ps), -1, 2).transpose(1, 0, 2, 3).reshape(len(ps), -1, 2)
        res += [per.mean(1), per.std(1, ddof=1) / np.sqrt(per.shape[1])]
    return res


@pytest.mark.parametrize(
    ("ps", "qw", "qc", "c", "G", "a", "baseline"),
    [
        ((0.3, 0.7), 0.8, 0.6, 5, 8, 1.0, "mean"),  # wrong runs longer, aware
        ((0.3, 0.7), 0.8, 0.6, 5, 8, 0.0, "mean"),  # blind: E[z^3] != 0, so it drifts
        ((0.4,), 0.8, 0.6, 5, 8, 1.0, "none"),  # REINFORCE++, no baseline
    ],
)
def test_whitened_drift_under_the_token_normalizer_matches_monte_carlo(
    ps, qw, qc, c, G, a, baseline
):
    """The leading 1/M term against batches of M = 128 groups: within 4.5 standard errors plus
    3% (the O(1/M) rest); the unwhitened-token-drift-over-sd answer (w's own term alone, z
    instead of z (3 + z^2)/2) is about half of it and fails here."""
    exact = whitened_tail_drift(np.array(ps), qw, qc, c, G, "token", a, baseline, n_groups=128)
    mean, se, raw_mean, raw_se = monte_carlo_token(np.array(ps), qw, qc, c, G, a, baseline)
    want = np.stack([exact.wrong, exact.correct], axis=1)  # (P, 2)
    assert (np.abs(mean - want) < 4.5 * se + 0.03 * np.abs(want)).all(), (mean, want, se)
    assert (np.abs(want) > 20 * se).all()  # resolved: not 0, the 'constant' answer
    assert (np.abs(raw_mean - want) < 4.5 * raw_se).all(), (raw_mean, want, raw_se)


def test_whitened_token_drift_by_hand():
    """One prompt p = 0.5, G = 2, c = 4, aware, q_w = 0.5 / q_c = 0.2 (as above: mu = -0.1875 /
    9.25, sd^2 = 1.15625 / 9.25 - mu^2, D = 9.25), M = 8. k = 0 (1/4): two wrong, a = 0; k = 1
    (1/2): a = +1/2 correct on theta_c, -1/2 wrong on theta_w; k = 2 (1/4): two correct, a = 0.
    With g(a) = z (3 + z^2), z = (a - mu)/sd: E[sum on w g] = g(0)/2 + g(-1/2)/2 = -3.2077,
    E[sum on c g] = g(1/2)/2 + g(0)/2 = 3.8984; E[T_w] = 1, E[T_c] = 0.25, so u_w = +3.2077 /
    (2 x 8 x 9.25^2) = +2.343e-3 and u_c = -0.25 x 3.8984 / (16 x 9.25^2) = -7.119e-4."""
    mu = -0.1875 / 9.25
    sd = np.sqrt(1.15625 / 9.25 - mu**2 + 1e-8)

    def g(x):
        return (x - mu) / sd * (3 + ((x - mu) / sd) ** 2)

    on_w, on_c = g(0) / 2 + g(-0.5) / 2, g(0.5) / 2 + g(0) / 2
    assert (on_w, on_c) == pytest.approx((-3.2077157, 3.8983601), rel=1e-7)
    out = whitened_tail_drift(0.5, 0.5, 0.2, 4, 2, "token", 1.0, n_groups=8)
    assert float(out.wrong) == pytest.approx(-1.0 * on_w / (16 * 9.25**2), rel=1e-12)
    assert float(out.correct) == pytest.approx(-0.25 * on_c / (16 * 9.25**2), rel=1e-12)
    # leading order in 1/M: M times the drift is the same at every M
    more = whitened_tail_drift(0.5, 0.5, 0.2, 4, 2, "token", 1.0, n_groups=64)
    assert 64 * float(more.wrong) == pytest.approx(8 * float(out.wrong), rel=1e-12)


def test_the_token_expansion_reproduces_length_drift_unwhitened():
    """The same first-order expansion without the whitening, -E[T_X] E[N_X] / (M D^2) with E[N_w]
    = -a G Sigma, against core.length_drift's exact Laplace integral for the token mean over M
    population batchmates: the relative gap shrinks as 1/M (< 1.2% at M = 16, < 0.15% at 128)."""
    ps, G, c, qw, qc, a = np.array([0.3, 0.7]), 8, 5, 0.8, 0.6, 1.0
    tw, tc = wrong_tail_mean(qw, qc, a), correct_tail_mean(qw, qc, a)
    d = (G * (c + ps * tc + (1 - ps) * tw)).mean()
    n_w = -a * G * sigma_moment(ps, G, 0.0)
    for m, tol in ((16, 0.012), (128, 0.0015)):
        exact = tail_drift(ps, qw, qc, c, G, 0.0, "token", a, scope="batch", n_groups=m,
                           batchmates="population")  # fmt: skip
        first = -tail_mean(qw) * n_w / (m * d**2), tail_mean(qc) * n_w / (m * d**2)
        assert exact.wrong == pytest.approx(first[0], rel=tol)
        assert exact.correct == pytest.approx(first[1], rel=tol)


def test_bad_input_names_it():
    with pytest.raises(ValueError, match="length_norm='token' needs n_groups"):
        whitened_tail_drift(0.5, 0.5, 0.5, 4, 8, length_norm="token")
    with pytest.raises(ValueError, match="n_groups must be an integer >= 1"):
        whitened_tail_drift(0.5, 0.5, 0.5, 4, 8, length_norm="token", n_groups=0)
    with pytest.raises(ValueError, match="length_norm='lambda' is not valid"):
        whitened_tail_drift(0.5, 0.5, 0.5, 4, 8, length_norm="lambda")
    with pytest.raises(ValueError, match="needs max_length > 0"):
        whitened_tail_drift(0.5, 0.5, 0.5, 4, 8, length_norm="constant")
    with pytest.raises(ValueError, match="q_wrong and q_correct must lie in \\(0, 1\\)"):
        whitened_tail_drift(0.5, 1.0, 0.5, 4, 8)


@pytest.mark.parametrize(
    ("args", "kwargs", "line"),
    [
        ((0.5, 0.5, 0.5, 4, 8), {"length_norm": "constant"},
         "length_norm='constant' needs max_length > 0 (L_max)"),
        ((0.5, 0.5, 0.5, 4, 8), {"length_norm": "token"},
         "length_norm='token' needs n_groups (M, groups per batch) >= 1"),
        ((0.5, 0.5, 1.5, 4, 8), {}, "q_correct must lie in [0, 1] (no NaN)"),
        ((0.5, "x", 0.5, 4, 8), {}, "q_wrong must be numeric, got 'x'"),
    ],
)  # fmt: skip
def test_each_refusal_word_for_word(args, kwargs, line):
    """The whole line (make mutate: a changed word or a swapped name survived a `match`)."""
    with pytest.raises(ValueError) as err:
        whitened_tail_drift(*args, **kwargs)
    assert str(err.value) == line
