"""The length drift of the length-weighted baseline (OPO, core.length_drift.tail_drift with
baseline='length_weighted') against a Monte Carlo through the dial's own OPO advantages
(core.advantage.advantages with the responses' lengths): the update of each tail parameter
under the constant normalizer, sum_i A_i s_i 1{i uses it} / (G L_max)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from grpo_dial.core import length_drift as ld
from grpo_dial.core import length_weighted_drift as lw
from grpo_dial.core import tail_laplace as tl
from grpo_dial.core.advantage import advantages
from grpo_dial.core.dial import dial_from_config
from grpo_dial.core.length_drift import tail_drift

L_MAX = 40.0


def monte_carlo(p, qw, qc, c, G, a, std_power, groups=60_000, seed=0):
    """(mean, se) of u_w and u_c per group under the dial's OPO advantages."""
    rng = np.random.default_rng(seed)
    r = (rng.random((groups, G)) < p).astype(float)
    uses_w = rng.random((groups, G)) < np.where(r == 1, (1 - a) / 2, (1 + a) / 2)
    q = np.where(uses_w, qw, qc)
    t = rng.geometric(1 - q) - 1  # P(T = t) = (1 - q) q^t
    s = (1 - q) * t - q  # the tail's score
    dial = dial_from_config({"preset": "opo", "std_power": std_power, "eps": 0.0})
    ids = torch.arange(groups).repeat_interleave(G)
    lengths = torch.from_numpy((c + t).ravel())
    adv = advantages(torch.from_numpy(r.ravel()), ids, dial, lengths=lengths)
    adv = adv.numpy().reshape(groups, G)
    out = []
    for uses in (uses_w, ~uses_w):
        u = (adv * s * uses).sum(1) / (G * L_MAX)  # (groups,)
        out.append((u.mean(), u.std(ddof=1) / np.sqrt(groups)))
    return out


@pytest.mark.parametrize(
    ("p", "qw", "qc", "c", "G", "a", "std_power"),
    [
        (0.4, 0.8, 0.6, 5, 8, 1.0, 0.0),  # the wrong path runs longer and the policy knows
        (0.3, 0.5, 0.85, 3, 4, 0.6, 0.0),  # the correct path runs longer, partly aware
        (0.6, 0.75, 0.5, 8, 6, 1.0, 1.0),  # divided by the group's std
        (0.5, 0.8, 0.6, 5, 8, 0.0, 0.0),  # blind: 0
    ],
)
def test_length_weighted_drift_matches_monte_carlo(p, qw, qc, c, G, a, std_power):
    exact = tail_drift(p, qw, qc, c, G, std_power=std_power, length_norm="constant",
                       awareness=a, baseline="length_weighted", max_length=L_MAX)  # fmt: skip
    (mw, sw), (mc, sc) = monte_carlo(p, qw, qc, c, G, a, std_power)
    assert abs(float(exact.wrong) - mw) < 4.5 * sw
    assert abs(float(exact.correct) - mc) < 4.5 * sc
    if a == 0:
        assert abs(float(exact.wrong)) < 1e-15 and abs(float(exact.correct)) < 1e-15


def test_the_aware_wrong_tail_is_pushed_longer_and_the_mean_baseline_has_no_drift():
    kw = {"length_norm": "constant", "awareness": 1.0, "std_power": 0.0}
    opo = tail_drift(0.4, 0.8, 0.6, 5, 8, baseline="length_weighted", max_length=L_MAX, **kw)
    mean = tail_drift(0.4, 0.8, 0.6, 5, 8, **kw)
    assert float(opo.wrong) > 1e-5 and float(opo.correct) < -1e-5
    assert float(mean.wrong) == 0.0 == float(mean.correct)
    with pytest.raises(ValueError, match="derived for length_norm 'constant' with its max_length"):
        tail_drift(0.4, 0.8, 0.6, 5, 8, baseline="length_weighted", max_length=L_MAX)


def _length_weighted_loop(p, qw, qc, c, G, a, alpha, ddof, eps):
    """The loop over (k, m1, m0) that length_weighted_integrals replaced (an _own integral for every
    routing), kept as the reference."""
    pk = tl.binomial_pmf(G, p)
    cc = c[:, None]
    lam = tl.NODES[None, :] / (G * cc)
    tw, tc = tl.tail_transforms(lam, qw[:, None]), tl.tail_transforms(lam, qc[:, None])
    core = np.exp(-lam * G * cc) * tl.WEIGHTS[None, :] / (G * cc)
    pi0, pi1, jw, jc = (1 + a) / 2, (1 - a) / 2, np.zeros(p.size), np.zeros(p.size)
    for k in range(1, G):
        sd = np.sqrt(k * (G - k) / G / max(G - ddof, 1))
        weight = pk[:, k] / ld.std_factor(sd, eps, alpha)
        f1, f0 = tl.binomial_pmf(k, pi1), tl.binomial_pmf(G - k, pi0)
        for m1 in range(k + 1):
            for m0 in range(G - k + 1):
                n = m1 + m0
                w = weight * f1[:, m1] * f0[:, m0]
                jw += w * (core * lw._own(n, m1, k, cc, tw, tc, G)).sum(1)
                jc += w * (core * lw._own(G - n, k - m1, k, cc, tc, tw, G)).sum(1)
    return np.stack([jw, jc])


def _inputs(e, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.uniform(0.02, 0.98, e), rng.uniform(0.3, 0.9, e), rng.uniform(0.3, 0.9, e),
            rng.choice([3.0, 5.0, 12.0], e), rng.uniform(0, 1, e))  # fmt: skip


@pytest.mark.parametrize(("G", "alpha", "ddof", "eps"), [(8, 0.0, 0, 0.0), (5, 1.0, 1, 1e-6)])
def test_length_weighted_integrals_equal_the_loop_over_routings(G, alpha, ddof, eps):
    """Summing the counts per n before integrating (one _own integral per n) changes nothing:
    equal to the loop over every (k, m1, m0) to 1e-12, at mixed awareness and core lengths."""
    p, qw, qc, c, a = _inputs(40)
    new = lw.length_weighted_integrals(p, qw, qc, c, G, a, alpha, ddof, eps)
    old = _length_weighted_loop(p, qw, qc, c, G, a, alpha, ddof, eps)
    np.testing.assert_allclose(new, old, rtol=1e-12, atol=1e-12 * np.abs(old).max())
    assert np.abs(old).min() > 0


if __name__ == "__main__":  # benchmark: python tests/core/test_length_weighted_drift.py
    import time

    p, qw, qc, c, a = _inputs(1536)  # the engines' length_bias: 1,536 prompts, G = 8
    args = (p, qw, qc, c, 8, a, 0.0, 0, 1e-8)
    times = {}
    for name, f in (("loop", _length_weighted_loop), ("per n", lw.length_weighted_integrals)):
        t0 = time.perf_counter()
        f(*args)
        times[name] = time.perf_counter() - t0
    print(f"OPO closed form at 1,536 prompts, G = 8: loop {times['loop']:.3f} s, per n "
          f"{times['per n']:.3f} s, ratio {times['loop'] / times['per n']:.1f}x")  # fmt: skip
