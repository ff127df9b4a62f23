"""Tests for grpo_dial.core.length_drift: series, quadrature, exact enumeration through
advantage.policy_loss, Monte Carlo through the project's aggregators, and the issue's claims."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from scipy.integrate import quad
from torch.func import vmap

from grpo_dial.analysis.length_bias.step import draw_tails, tail_updates
from grpo_dial.core import length_drift as L
from grpo_dial.core.advantage import advantages, policy_loss
from grpo_dial.core.dial import Dial, preset
from grpo_dial.core.theory import expected_signal


def _sig(x):
    return 1 / (1 + np.exp(-x))


def test_score_is_the_gradient_of_the_geometric_log_probability():
    theta = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    for t in (0, 1, 5, 17):
        logp = t * torch.nn.functional.logsigmoid(theta) + torch.nn.functional.logsigmoid(-theta)
        (g,) = torch.autograd.grad(logp, theta)
        assert float(L.tail_score(t, _sig(0.7))) == pytest.approx(float(g), rel=1e-12)
    assert float(L.tail_mean(_sig(0.7))) == pytest.approx(np.exp(0.7))


@pytest.mark.parametrize("q,c", [(0.3, 1), (0.8, 20), (0.95, 3), (0.5, 7.5)])
def test_inverse_length_covariance_matches_the_series(q, c):
    t = np.arange(4000)
    series = np.sum((1 - q) * q**t * ((1 - q) * t - q) / (c + t))
    assert float(L.inverse_length_covariance(q, c)) == pytest.approx(series, rel=1e-10)
    assert series < 0


def _token_by_quad(p, qw, qc, c, G, a):
    nw, _, _, _ = L._routing_moments(np.array([p]), G, np.array([a]), 1.0, 0, 0.0, "keep", 0)

    def f(lam):
        x = np.exp(-lam)
        phw, phc = (1 - qw) / (1 - qw * x), (1 - qc) / (1 - qc * x)
        psw = -qw * (1 - qw) * (1 - x) / (1 - qw * x) ** 2
        terms = (nw[0, n] * psw * phw ** (n - 1) * phc ** (G - n) for n in range(1, G + 1))
        return np.exp(-lam * G * c) * sum(terms)

    return quad(f, 0, np.inf, limit=500, epsabs=0, epsrel=1e-12)[0]


@pytest.mark.parametrize(
    "args",
    [(0.5, 0.8, 0.8, 20, 8, 1.0), (0.3, 0.95, 0.6, 3, 4, 0.6), (0.7, 0.99, 0.99, 50, 8, 1.0)],
)
def test_token_quadrature_matches_adaptive_quadrature(args):
    p, qw, qc, c, G, a = args
    fixed = float(L.tail_drift(p, qw, qc, c, G, length_norm="token", awareness=a).wrong)
    assert fixed == pytest.approx(_token_by_quad(*args), rel=1e-9)


# --- exact enumeration through advantage.policy_loss (G = 2, tails truncated at 1e-13) ------------


def _exact_through_policy_loss(dial, p, tw0, tc0, c, a, t_max=45):
    """E[u] by enumerating every (r, uses theta_w, T) of a G = 2 group, through the project's
    advantages and policy_loss with per-token log-probs and autograd; one group per batch."""
    qw, qc = _sig(tw0), _sig(tc0)
    resp = list(itertools.product((0, 1), (0, 1), range(t_max)))  # (r, uses_w, T)
    combos = list(itertools.product(resp, resp))
    prob = np.array(
        [
            np.prod(
                [
                    (p if r else 1 - p)
                    * ((1 - a) / 2 if r else (1 + a) / 2) ** w
                    * (1 - ((1 - a) / 2 if r else (1 + a) / 2)) ** (1 - w)
                    * (1 - (qw if w else qc))
                    * (qw if w else qc) ** t
                    for r, w, t in combo
                ]
            )
            for combo in combos
        ]
    )
    flat = np.array([x for combo in combos for x in combo])  # (2C, 3)
    r = torch.tensor(flat[:, 0], dtype=torch.float64)
    ids = torch.arange(len(combos)).repeat_interleave(2)
    adv = advantages(r, ids, dial)
    tw = torch.tensor(tw0, dtype=torch.float64, requires_grad=True)
    tc = torch.tensor(tc0, dtype=torch.float64, requires_grad=True)
    theta = torch.where(torch.from_numpy(flat[:, 1] == 1), tw, tc)  # (2C,)
    length = torch.from_numpy(c + flat[:, 2])
    pos = torch.arange(int(length.max()))[None, :]
    mask = pos < length[:, None]
    cont = (pos >= c) & mask
    last = pos == length[:, None] - 1
    logp = torch.where(cont, torch.nn.functional.logsigmoid(theta)[:, None], 0.0) + torch.where(
        last, torch.nn.functional.logsigmoid(-theta)[:, None], 0.0
    )
    per_group = vmap(lambda lp, m, av: policy_loss(lp, lp.detach(), av, m, dial))(
        logp.view(len(combos), 2, -1), mask.view(len(combos), 2, -1), adv.view(-1, 2)
    )
    gw, gc = torch.autograd.grad((torch.from_numpy(prob) * per_group).sum(), (tw, tc))
    return -float(gw), -float(gc), prob.sum()


@pytest.mark.parametrize(
    "dial,kw",
    [
        (preset("grpo").replace(eps=0.0), {"length_norm": "sequence"}),
        (
            Dial(std_power=0.0, length_norm="sequence", eps=0.0),
            {"length_norm": "sequence", "std_power": 0.0},
        ),
        (Dial(length_norm="token", eps=0.0), {"length_norm": "token"}),
        (
            Dial(length_norm="token", std_ddof=1, eps=1e-3),
            {"length_norm": "token", "ddof": 1, "eps": 1e-3},
        ),
        (Dial(length_norm="constant", max_length=80, eps=0.0), {"length_norm": "constant"}),
    ],
)
def test_closed_form_equals_exact_expectation_through_policy_loss(dial, kw):
    p, tw0, tc0, c, a = 0.35, np.log(0.9), np.log(0.4), 2, 0.6
    uw, uc, total = _exact_through_policy_loss(dial, p, tw0, tc0, c, a)
    assert total == pytest.approx(1.0, abs=1e-11)  # enumeration is complete up to 1e-11
    cf = L.tail_drift(p, _sig(tw0), _sig(tc0), c, 2, awareness=a, **kw)
    assert uw == pytest.approx(float(cf.wrong), rel=1e-8, abs=1e-14)
    assert uc == pytest.approx(float(cf.correct), rel=1e-8, abs=1e-14)
    if kw["length_norm"] != "constant":
        assert uw > 0 > uc  # wrong tails pushed longer, correct ones shorter


# --- Monte Carlo at G = 8 through tail_updates (advantages, keep_mask, the aggregators) ---------

DAPO_KW = {"length_norm": "token", "scope": "batch", "n_groups": 4, "silent": "drop"}
MC_CASES = [
    ("sequence", preset("grpo").replace(eps=0.0), {"length_norm": "sequence"}, 1),
    (
        "alpha0",
        Dial(std_power=0.0, length_norm="sequence", eps=0.0),
        {"length_norm": "sequence", "std_power": 0.0},
        1,
    ),
    ("token group", Dial(length_norm="token", eps=0.0), {"length_norm": "token"}, 1),
    (
        "token batch",
        Dial(length_norm="token", eps=0.0),
        {"length_norm": "token", "scope": "batch", "n_groups": 4},
        4,
    ),
    ("dapo", preset("dapo").replace(eps=0.0), DAPO_KW | {"max_resample_rounds": 4}, 4),
    (
        "constant",
        preset("dr_grpo").replace(max_length=64),
        {"length_norm": "constant", "std_power": 0.0},
        1,
    ),
]
TW0, TC0 = np.log(2.0), np.log(1.2)


def _mc(dial, m, a, p=0.4, tw0=TW0, tc0=TC0, c=4, j=20000, seed=0):
    rng = np.random.default_rng(seed)
    r = rng.random((j, 8)) < p
    if dial.silent == "drop":
        for _ in range(dial.max_resample_rounds):
            k = r.sum(1)
            pending = np.flatnonzero((k == 0) | (k == 8))
            r[pending] = rng.random((pending.size, 8)) < p
    uw = rng.random((j, 8)) < np.where(r, (1 - a) / 2, (1 + a) / 2)
    t = draw_tails(rng.random((j, 8)), np.where(uw, tw0, tc0))
    w, cc = tail_updates(r, uw, t, np.full(j, tw0), np.full(j, tc0), c, dial, m)
    per_batch = lambda x: x.reshape(-1, m).sum(1) / m  # noqa: E731 (batches are the samples)
    w, cc = per_batch(w), per_batch(cc)
    return w.mean(), w.std() / np.sqrt(w.size), cc.mean(), cc.std() / np.sqrt(cc.size)


@pytest.mark.parametrize("name,dial,kw,m", MC_CASES, ids=[c[0] for c in MC_CASES])
@pytest.mark.parametrize("a", [0.0, 0.7])
def test_monte_carlo_through_the_aggregators_matches_the_closed_form(name, dial, kw, m, a):
    mw, sw, mc, sc = _mc(dial, m, a)
    cf = L.tail_drift(0.4, _sig(np.log(2.0)), _sig(np.log(1.2)), 4, 8, awareness=a, **kw)
    assert abs(mw - float(cf.wrong)) < 4 * sw
    assert abs(mc - float(cf.correct)) < 4 * sc
    if a == 0 or name == "constant":
        assert float(cf.wrong) == pytest.approx(0, abs=1e-15)
        assert float(cf.correct) == pytest.approx(0, abs=1e-15)
    elif name in ("sequence", "alpha0"):
        assert float(cf.wrong) > 10 * sw  # the check has power: the drift is resolved


def test_blind_tail_has_zero_drift_under_every_normalizer():
    p = np.linspace(0.05, 0.95, 7)
    for norm, scope in (
        ("sequence", "group"),
        ("token", "group"),
        ("token", "batch"),
        ("constant", "group"),
    ):
        d = L.tail_drift(
            p, 0.9, 0.6, 5, 8, length_norm=norm, awareness=0.0, scope=scope, n_groups=3
        )
        assert np.abs(d.wrong).max() < 1e-15 and np.abs(d.correct).max() < 1e-15


def test_constant_normalizer_is_exactly_zero():
    d = L.tail_drift([0.1, 0.5, 0.9], 0.95, 0.3, 10, 8, std_power=0.0, length_norm="constant")
    assert (d.wrong == 0).all() and (d.correct == 0).all()


def test_sequence_drift_is_linear_in_awareness_and_symmetric_at_equal_tails():
    a = np.linspace(0, 1, 5)
    d = L.tail_drift(0.3, 0.8, 0.8, 20, 8, awareness=a)
    np.testing.assert_allclose(d.wrong, a * d.wrong[-1], rtol=1e-12)
    np.testing.assert_allclose(d.correct, -d.wrong, rtol=1e-12)


@pytest.mark.parametrize("p", [0.05, 0.3, 0.5, 0.9])
def test_grpo_outruns_alpha0_by_E_sigma2_over_E_sigma(p):
    g = L.tail_drift(p, 0.8, 0.8, 20, 8, std_power=1.0).wrong
    n = L.tail_drift(p, 0.8, 0.8, 20, 8, std_power=0.0).wrong
    e_sigma, e_sigma2 = expected_signal(p, 8, "grpo"), p * (1 - p) * 7 / 8
    assert float(L.sigma_moment(p, 8, 1.0)) == pytest.approx(float(e_sigma), rel=1e-12)
    assert float(L.sigma_moment(p, 8, 0.0)) == pytest.approx(e_sigma2, rel=1e-12)
    assert float(n / g) == pytest.approx(e_sigma2 / float(e_sigma), rel=1e-12)
    assert float(n / g) < 1


@pytest.mark.parametrize("c", [5, 10, 20, 40])
def test_token_mean_is_about_15_percent_of_the_sequence_mean_at_G8(c):
    seq = L.tail_drift(0.5, 0.8, 0.8, c, 8).wrong
    tok = L.tail_drift(0.5, 0.8, 0.8, c, 8, length_norm="token").wrong
    assert 0.14 < float(tok / seq) < 0.16  # 0.158 (c 5), 0.159, 0.151, 0.142 (c 40)
    batch = L.tail_drift(0.5, 0.8, 0.8, c, 8, length_norm="token", scope="batch", n_groups=16).wrong
    assert float(batch / tok) == pytest.approx(1 / 16, rel=0.05)  # less when more is pooled


def test_silent_and_singleton_groups_give_no_drift():
    for norm in L.NORMALIZERS:
        assert float(L.tail_drift(0.0, 0.8, 0.8, 5, 8, length_norm=norm).wrong) == 0
        assert float(L.tail_drift(1.0, 0.8, 0.8, 5, 8, length_norm=norm).correct) == 0
        assert float(L.tail_drift(0.5, 0.8, 0.8, 5, 1, length_norm=norm).wrong) == 0


def test_dynamic_sampling_reweights_sigma_moment():
    plain = L.sigma_moment(0.05, 8, 1.0)
    refill = L.sigma_moment(0.05, 8, 1.0, silent="drop", max_resample_rounds=4)
    s = 0.05**8 + 0.95**8
    assert float(refill) == pytest.approx(float(plain) * sum(s**i for i in range(5)), rel=1e-12)


@pytest.mark.parametrize(
    "kw,match",
    [
        ({"core_length": -1}, "core_length"),
        ({"core_length": 0}, "core_length"),
        ({"q_wrong": 1.0}, "q_wrong"),
        ({"q_correct": 0.0}, "q_correct"),
        ({"group_size": 0}, "group_size"),
        ({"awareness": 1.5}, "awareness"),
        ({"p": -0.1}, "p must"),
        ({"length_norm": "tokens"}, "length_norm"),
        ({"scope": "all"}, "scope"),
        ({"std_power": 2.0}, "std_power"),
    ],
)
def test_bad_knobs_fail_with_one_line(kw, match):
    args = {"p": 0.5, "q_wrong": 0.8, "q_correct": 0.8, "core_length": 5, "group_size": 8} | kw
    with pytest.raises(ValueError, match=match) as err:
        L.tail_drift(**args)
    assert "\n" not in str(err.value)


def test_negative_tail_length_is_rejected():
    with pytest.raises(ValueError, match="tail length"):
        L.tail_score(-1, 0.5)
