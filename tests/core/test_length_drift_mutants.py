"""core.length_drift: the token normalizer's drift of both tails at awareness > 0 against a
brute-force sum, the tail means by hand, and the one-line refusals (issue 34 item 4)."""

import itertools
import re

import numpy as np
import pytest

from grpo_dial.core import length_drift as L


def _brute_token_drift(p, qw, qc, c, a, tmax=300):
    """E[u_w], E[u_c] of a group of G = 2 under the token mean, by summing every reward, routing
    and tail length (T < tmax): u_X = sum_{i on X} A_i ((1 - q_X) T_i - q_X) / (2 c + T_1 + T_2),
    A = +1 / -1 in a split group (k = 1: sigma = 1/2), a correct response on theta_w with
    probability (1 - a)/2, a wrong one with (1 + a)/2."""
    pi0, pi1 = (1 + a) / 2, (1 - a) / 2
    t = np.arange(tmax)
    s_len = 2 * c + t[:, None] + t[None, :]  # (T, T)
    uw = uc = 0.0
    for r in ((1, 0), (0, 1)):  # k = 0 or 2: silent, A = 0
        pr = p * (1 - p)
        for route in itertools.product([0, 1], repeat=2):  # 1: the response uses theta_w
            w = pr
            for ri, on_w in zip(r, route, strict=True):
                pw = pi1 if ri else pi0
                w *= pw if on_w else 1 - pw
            q = [qw if on_w else qc for on_w in route]
            joint = np.outer((1 - q[0]) * q[0] ** t, (1 - q[1]) * q[1] ** t)
            scores = (((1 - q[0]) * t - q[0])[:, None], ((1 - q[1]) * t - q[1])[None, :])
            for i, on_w in enumerate(route):
                val = w * (joint * (1.0 if r[i] else -1.0) * scores[i] / s_len).sum()
                uw, uc = (uw + val, uc) if on_w else (uw, uc + val)
    return uw, uc


@pytest.mark.parametrize("args", [(0.3, 0.6, 0.4, 3.0, 0.5), (0.5, 0.5, 0.7, 2.0, 0.8)])
def test_token_drift_of_both_tails_matches_a_brute_force_sum(args):
    p, qw, qc, c, a = args
    got = L.tail_drift(p, qw, qc, c, 2, length_norm="token", awareness=a)
    want = _brute_token_drift(p, qw, qc, c, a)
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
