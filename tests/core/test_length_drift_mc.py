"""Monte Carlo checks of grpo_dial.core.length_drift where the other tests have no power: DAPO at
low and high p with batchmates drawn from a population (`batchmates='population'`) and silent
groups dropped after their redraws (whose zero length must stay in the batch's token count), and
the dynamic-sampling distribution of k against a simulation of the redraw process itself.

The drift MC goes through the project's advantages, keep_mask and aggregators
(analysis.length_bias.step.tail_updates). A control variate keeps it small: X = sum_i A_i s_i over a
prompt's responses on the tail parameter has mean exactly 0 (the tail score s has mean 0 given
the rewards and the routing, which fix A), and correlates with the update, whose only other
factor is the batch's token normalizer; the estimate is mean(u - beta X), beta fitted.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from grpo_dial.analysis.length_bias.step import draw_tails, tail_updates
from grpo_dial.core import length_drift as L
from grpo_dial.core.advantage import advantages
from grpo_dial.core.dial import preset

G, M, CORE, AWARE, ROUNDS = 8, 4, 4, 1.0, 4
TW, TC = np.log(6.0), np.log(0.5)  # wrong path: mean tail 6; correct path: 0.5
DAPO = preset("dapo").replace(eps=0.0, max_resample_rounds=ROUNDS)


def _sig(x):
    return 1 / (1 + np.exp(-x))


def _draw(p: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """(J, G) final rewards: a silent group is redrawn up to ROUNDS times (DAPO's refill)."""
    r = rng.random((len(p), G)) < p[:, None]
    for _ in range(ROUNDS):
        k = r.sum(1)
        pending = np.flatnonzero((k == 0) | (k == G))
        r[pending] = rng.random((pending.size, G)) < p[pending, None]
    return r


def _mc_drift(ps: np.ndarray, j: int, seed: int):
    """Per value of p: (wrong, wrong_se, correct, correct_se) of the control-variate estimate;
    each group's p drawn uniformly from ps, batches of M consecutive groups."""
    rng = np.random.default_rng(seed)
    p = rng.choice(ps, j)  # (J,)
    r = _draw(p, rng)
    uses_w = rng.random((j, G)) < np.where(r, (1 - AWARE) / 2, (1 + AWARE) / 2)
    t = draw_tails(rng.random((j, G)), np.where(uses_w, TW, TC))
    uw, uc = tail_updates(r, uses_w, t, np.full(j, TW), np.full(j, TC), CORE, DAPO, M)
    ids = torch.arange(j).repeat_interleave(G)
    adv = advantages(torch.from_numpy(r.reshape(-1).astype(float)), ids, DAPO).numpy()
    q = _sig(np.where(uses_w, TW, TC))
    a_s = adv.reshape(j, G) * ((1 - q) * t - q)  # (J, G)
    xw, xc = np.where(uses_w, a_s, 0.0).sum(1), np.where(uses_w, 0.0, a_s).sum(1)
    out = []
    for value in ps:
        sel = p == value
        row = []
        for u, x in ((uw[sel], xw[sel]), (uc[sel], xc[sel])):
            beta = np.cov(u, x)[0, 1] / x.var()
            adj = u - beta * x
            row += [adj.mean(), adj.std() / np.sqrt(adj.size)]
        out.append(row)
    return np.array(out)  # (len(ps), 4)


@pytest.mark.parametrize("ps", [(0.05, 0.95), (0.05,)], ids=["population", "self"])
def test_dapo_drift_with_dropped_groups_and_population_batchmates_matches_monte_carlo(ps):
    """At p = 0.05 (and 0.95) about 66% of first draws are silent and 13% of groups stay silent
    after 4 redraws: dropped, they add no tokens to the batch's normalizer. With batchmates
    from the population {0.05, 0.95} a p = 0.05 prompt shares its batch with short correct
    responses; treated as copies of itself ('self') its prediction would be 28% lower, and a
    dropped group counted with no length mass halves it; both are > 8 standard errors away."""
    ps = np.array(ps)
    mc = _mc_drift(ps, 40_000, seed=11)
    mates = "population" if len(ps) > 1 else "self"
    cf = L.tail_drift(ps, _sig(TW), _sig(TC), CORE, G, length_norm="token", awareness=AWARE,
                      scope="batch", n_groups=M, silent="drop", max_resample_rounds=ROUNDS,
                      batchmates=mates)  # fmt: skip
    for i in range(len(ps)):
        wrong, wrong_se, correct, correct_se = mc[i]
        assert abs(wrong - cf.wrong[i]) < 4 * wrong_se, (ps[i], wrong, cf.wrong[i], wrong_se)
        assert abs(correct - cf.correct[i]) < 4 * correct_se, (ps[i], correct, cf.correct[i])
        assert cf.wrong[i] > 10 * wrong_se  # the check resolves the drift itself
    if mates == "population":  # the alternative readings are far outside the MC's interval
        self_cf = L.tail_drift(ps, _sig(TW), _sig(TC), CORE, G, length_norm="token",
                               awareness=AWARE, scope="batch", n_groups=M, silent="drop",
                               max_resample_rounds=ROUNDS)  # fmt: skip
        assert np.all(np.abs(self_cf.wrong - mc[:, 0]) > 6 * mc[:, 1])


def test_dynamic_sampling_k_distribution_matches_the_redraw_process():
    """E[sigma^(2 - alpha)] over the final groups of DAPO's refill (up to R redraws of a silent
    group, the last draw kept) at p = 0.05, G = 8, simulated draw by draw, against
    sigma_moment(silent='drop'); p = 0.05 makes a silent first draw common (s = 0.66), so the
    refill factor 1 + s + ... + s^R = 2.58 is far from its neighbours (2.39 for R - 1)."""
    rng = np.random.default_rng(5)
    for alpha in (1.0, 0.0):
        r = _draw(np.full(400_000, 0.05), rng)
        sigma = r.std(axis=1)  # population std of each final group
        x = sigma ** (2 - alpha)
        want = float(L.sigma_moment(0.05, G, alpha, silent="drop", max_resample_rounds=ROUNDS))
        se = x.std() / np.sqrt(x.size)
        assert abs(x.mean() - want) < 4 * se, (alpha, x.mean(), want, se)
        fewer = float(L.sigma_moment(0.05, G, alpha, silent="drop", max_resample_rounds=ROUNDS - 1))
        assert abs(fewer - want) > 10 * se  # one redraw fewer is resolved
