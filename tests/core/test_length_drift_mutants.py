"""core.length_drift: the token normalizer's drift of both tails at awareness > 0 against a
brute-force sum, the tail means by hand, and the one-line refusals."""

import itertools
import re

import numpy as np
import pytest

from grpo_dial.core import length_drift as L


def _brute_token_drift(p, qw, qc, c, a, G, tmax):
    """E[u_w], E[u_c] of a group of G under the token mean, by summing every reward, routing and
    tail length (T < tmax): u_X = sum_{i on X} A_i ((1 - q_X) T_i - q_X) / (G c + sum_j T_j),
    A_i = (r_i - k/G) / sigma_k, sigma_k = sqrt(k (G - k)) / G (0 in a silent group), a correct
    response on theta_w with probability (1 - a)/2, a wrong one with (1 + a)/2."""
    pi0, pi1 = (1 + a) / 2, (1 - a) / 2
    t = np.arange(tmax, dtype=float)
    tails = np.meshgrid(*[t] * G, indexing="ij")  # G arrays (T, ..., T)
    s_len = G * c + sum(tails)
    uw = uc = 0.0
    for r in itertools.product([0, 1], repeat=G):
        k = sum(r)
        if k in (0, G):  # silent: A = 0
            continue
        sd = np.sqrt(k * (G - k)) / G
        adv = [((1 - k / G) if ri else -k / G) / sd for ri in r]
        for route in itertools.product([0, 1], repeat=G):  # 1: the response uses theta_w
            w = p**k * (1 - p) ** (G - k)
            for ri, on_w in zip(r, route, strict=True):
                pw = pi1 if ri else pi0
                w *= pw if on_w else 1 - pw
            q = [qw if on_w else qc for on_w in route]
            joint = np.ones(s_len.shape)
            for i in range(G):
                joint = joint * (1 - q[i]) * q[i] ** tails[i]
            for i, on_w in enumerate(route):
                val = w * (joint * adv[i] * ((1 - q[i]) * tails[i] - q[i]) / s_len).sum()
                uw, uc = (uw + val, uc) if on_w else (uw, uc + val)
    return uw, uc


@pytest.mark.parametrize(
    "args, G, tmax",
    [
        ((0.3, 0.6, 0.4, 3.0, 0.5), 2, 300),
        ((0.5, 0.5, 0.7, 2.0, 0.8), 2, 300),
        ((0.4, 0.5, 0.3, 2.0, 0.6), 3, 70),  # G = 3: one tail shared by two responses
    ],
)
def test_token_drift_of_both_tails_matches_a_brute_force_sum(args, G, tmax):
    p, qw, qc, c, a = args
    got = L.tail_drift(p, qw, qc, c, G, length_norm="token", awareness=a)
    want = _brute_token_drift(p, qw, qc, c, a, G, tmax)
    np.testing.assert_allclose([float(got.wrong), float(got.correct)], want, rtol=1e-9)


def test_a_batch_of_one_group_is_the_group_scope():
    args = (0.3, 0.6, 0.4, 3.0, 2)
    one = L.tail_drift(*args, length_norm="token", awareness=0.5, scope="batch", n_groups=1)
    group = L.tail_drift(*args, length_norm="token", awareness=0.5)
    np.testing.assert_allclose([one.wrong, one.correct], [group.wrong, group.correct])


def test_tail_means_by_hand():
    # E[T; q] = q / (1 - q): 1 at q = 1/2, 3 at q = 3/4; awareness 0.5: pi_0 = 3/4, pi_1 = 1/4
    assert L.wrong_tail_mean(0.5, 0.75, 0.5) == pytest.approx(0.75 * 1 + 0.25 * 3)
    assert L.correct_tail_mean(0.5, 0.75, 0.5) == pytest.approx(0.25 * 1 + 0.75 * 3)
    assert L.correct_tail_mean(0.5, 0.75, 1.0) == pytest.approx(3.0)


@pytest.mark.parametrize(
    "call, line",
    [
        (lambda: L.tail_mean(1.0), "q must lie strictly between 0 and 1"),
        (lambda: L.wrong_tail_mean(0.5, 0.5, 2.0), "awareness must lie in [0, 1]"),
        (lambda: L.correct_tail_mean(0.5, 0.5, -1.0), "awareness must lie in [0, 1]"),
        (lambda: L.sigma_moment(1.5, 4), "p must lie in [0, 1]"),
        (lambda: L.tail_drift(0.5, 0.5, 0.5, np.nan, 4), "core_length must be finite"),
        (lambda: L.tail_drift(0.5, 0.5, 0.5, 2.0, 4, ddof=-1), "ddof must be an integer >= 0"),
        (lambda: L.tail_drift(0.5, 0.5, 0.5, 2.0, 4, batchmates="x"), "unknown batchmates 'x'"),
    ],
)
def test_refusals_name_their_argument(call, line):
    with pytest.raises(ValueError, match=f"^{re.escape(line)}"):
        call()


def test_population_batchmates_need_one_core_length():
    with pytest.raises(
        ValueError, match="^batchmates='population' needs one core_length and awareness$"
    ):
        L.tail_drift([0.3, 0.5], 0.5, 0.5, [2.0, 3.0], 2, length_norm="token", scope="batch",
                     n_groups=2, batchmates="population")  # fmt: skip
