"""core.length_drift: what the full mutation run of length_drift.py left open (issue 48): the
defaults and the length-weighted guard against hand numbers, and every refusal word for word."""

from __future__ import annotations

import math
import re
from fractions import Fraction

import numpy as np
import pytest

from grpo_dial.core import length_drift as L

BASE = dict(p=0.5, q_wrong=0.5, q_correct=0.5, core_length=4, group_size=2)
OPO = dict(baseline="length_weighted", length_norm="constant")
LW_LINE = (
    "baseline='length_weighted' is derived for length_norm 'constant' with its max_length "
    "(L_max > 0) and silent 'keep'"
)


def _drift(**kw):
    return L.tail_drift(**{**BASE, **kw})


REFUSALS = [
    (lambda: L.sigma_moment(0.5, 0), "group_size must be an integer >= 1, got 0"),
    (lambda: L.sigma_moment(0.5, 2, ddof=-1), "ddof must be an integer >= 0, got -1"),
    (lambda: L.sigma_moment(0.5, 2, silent="x"), "unknown silent 'x'; valid: keep, drop"),
    (
        lambda: L.sigma_moment(0.5, 2, max_resample_rounds=-1),
        "max_resample_rounds must be an integer >= 0, got -1",
    ),
    (
        lambda: _drift(length_norm="x"),
        "unknown length_norm 'x'; valid: sequence, constant, token",
    ),
    (lambda: _drift(scope="x"), "unknown scope 'x'; valid: group, batch"),
    (lambda: _drift(silent="x"), "unknown silent 'x'; valid: keep, drop"),
    (lambda: _drift(scope="batch", n_groups=0), "n_groups must be an integer >= 1, got 0"),
    (lambda: _drift(baseline="x"), "unknown baseline 'x'; valid: mean, length_weighted"),
    (
        lambda: _drift(q_wrong=1.5),
        "q_wrong must lie strictly between 0 and 1, got min 1.5 max 1.5",
    ),
    (
        lambda: _drift(q_correct=1.5),
        "q_correct must lie strictly between 0 and 1, got min 1.5 max 1.5",
    ),
    (lambda: _drift(awareness=2), "awareness must lie in [0, 1], got min 2.0 max 2.0"),
    (lambda: _drift(group_size=0), "group_size must be an integer >= 1, got 0"),
    (
        lambda: _drift(max_resample_rounds=-1),
        "max_resample_rounds must be an integer >= 0, got -1",
    ),
    (lambda: _drift(**OPO, max_length=100, silent="drop"), LW_LINE),
    (lambda: _drift(**OPO), LW_LINE),  # no max_length
    (lambda: _drift(**OPO, max_length=0), LW_LINE),
    (lambda: _drift(**OPO, max_length="a"), "max_length must be numeric, got 'a'"),
    (lambda: _drift(eps=-1), "eps must be a finite number >= 0, got -1"),
    (lambda: _drift(eps=True), "eps must be a finite number >= 0, got True"),
    (lambda: _drift(eps="a"), "eps must be a finite number >= 0, got 'a'"),
    (lambda: _drift(eps=math.inf), "eps must be a finite number >= 0, got inf"),
    (lambda: _drift(std_power=True), "std_power must be a number in [0, 1], got True"),
    (lambda: _drift(std_power="1"), "std_power must be a number in [0, 1], got '1'"),
    (
        lambda: _drift(length_norm="token", scope="batch", n_groups=2, batchmates="population",
                       p=[0.3, 0.6], awareness=[0.2, 0.8]),
        "batchmates='population' needs one core_length and awareness",
    ),
    (lambda: L.tail_mean("a"), "q must be numeric, got 'a'"),
    (lambda: L.tail_mean(float("nan")), "q must be finite"),
    (lambda: L.wrong_tail_mean(0.5, 0.5, "a"), "awareness must be numeric, got 'a'"),
    (
        lambda: L.inverse_length_covariance(1.5, 3),
        "q must lie strictly between 0 and 1, got min 1.5 max 1.5",
    ),
    (lambda: L.tail_score("a", 0.5), "t must be numeric, got 'a'"),
    (lambda: L.tail_score(1, 1.5), "q must lie strictly between 0 and 1, got min 1.5 max 1.5"),
]


@pytest.mark.parametrize(("call", "message"), REFUSALS)
def test_refusals_word_for_word(call, message):
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        call()


def _h1(q: float) -> float:
    """h(q, 1) = -q (1-q) 2F1(2, 1; 3; q) / 2 with 2F1(1, 2; 3; q) = -2 (q + ln(1-q)) / q^2."""
    return (1 - q) * (q + math.log1p(-q)) / q


def test_the_defaults_by_hand():
    # G = 2, p = 1/2: k = 1 with probability 1/2, sigma = 1/2; std_power 1: Sigma = E[sigma] = 1/4
    assert float(L.sigma_moment(0.5, 2)) == pytest.approx(0.25, rel=1e-14)
    # silent='drop' with the default 0 redraws keeps k's distribution: still 1/4
    assert float(L.sigma_moment(0.5, 2, silent="drop")) == pytest.approx(0.25, rel=1e-14)
    # sequence drift of the wrong tail, a = 1, c = 1: -a Sigma h(q, 1) = (ln 2 - 1/2) / 4 at q = 1/2
    want = -0.25 * _h1(0.5)
    assert want == pytest.approx((math.log(2) - 0.5) / 4)
    got = L.tail_drift(0.5, 0.5, 0.5, 1, 2, silent="drop")
    assert float(got.wrong) == pytest.approx(want, rel=1e-12)
    assert float(got.correct) == pytest.approx(-want, rel=1e-12)


def test_a_batch_with_the_default_n_groups_is_one_group():
    kw = dict(BASE, length_norm="token", p=0.3, q_wrong=0.6, q_correct=0.4, group_size=3)
    batch, group = L.tail_drift(**kw, scope="batch"), L.tail_drift(**kw, scope="group")
    np.testing.assert_allclose([batch.wrong, batch.correct], [group.wrong, group.correct])


def test_population_batchmates_at_one_group_take_several_core_lengths():
    # one group per batch: the batchmates never enter, so population equals self, and the
    # one-core-length condition (needed only for batchmates) does not apply
    kw = dict(length_norm="token", p=0.3, q_wrong=0.6, q_correct=0.4, core_length=[3, 5])
    pop = L.tail_drift(**kw, group_size=3, batchmates="population")
    own = L.tail_drift(**kw, group_size=3, batchmates="self")
    np.testing.assert_allclose(pop.wrong, own.wrong, rtol=1e-14)
    assert np.all(pop.wrong != 0)


def test_a_blind_tail_under_opo_with_l_max_one():
    # awareness 0: the tail is independent of correctness, so OPO's shift moves it by 0 (L_max = 1
    # is a valid bound, not refused)
    got = _drift(**OPO, max_length=1.0, awareness=0.0)
    assert abs(float(got.wrong)) < 1e-15 and abs(float(got.correct)) < 1e-15


def test_exact_fractions_are_numbers():
    # q = 1/3: E[T] = q / (1 - q) = 1/2
    assert float(L.tail_mean(Fraction(1, 3))) == pytest.approx(0.5, rel=1e-15)
    np.testing.assert_allclose(L.tail_mean([Fraction(1, 3), Fraction(1, 2)]), [0.5, 1.0])
    # s(t) = (1 - q) t - q at t = 3, q = 1/4: 2
    assert float(L.tail_score(Fraction(3), Fraction(1, 4))) == pytest.approx(2.0, rel=1e-15)
