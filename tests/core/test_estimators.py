"""Tests for the dial's newer estimators (grpo_dial.core.advantage, core.token_weights,
core.difficulty_anchor): Stratified GRPO (arXiv 2510.06214), HA-DW (arXiv 2601.08521) and
lambda-GRPO (arXiv 2510.06870). Every expected value comes from a plain-Python loop written
from the papers' equations, never from the code under test; singleton, zero-variance and
empty-response groups are in every random case.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from itertools import pairwise

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from grpo_dial.core.advantage import (
    advantages,
    aggregate,
    make_token_weights,
    row_sums,
    token_mean,
)
from grpo_dial.core.dial import Dial, dial_from_config
from grpo_dial.core.estimators import hadw_weights
from grpo_dial.core.token_weights import (
    constant_weights,
    lambda_factors,
    lambda_objective,
    lambda_weights,
    sequence_weights,
    token_weights,
    unified_weights,
)
from grpo_dial.data.tasks import ArithmeticTask
from grpo_dial.data.tasks.base import GENERIC_STRATA, provided_strata, stratum_error

F64 = torch.float64
FAST = settings(max_examples=60, deadline=None)
H_FLOOR = 1e-3  # lambda-GRPO's floor of h = 1 + r z, as the module documents it


# ------------------------------------------------------------------ loop references (papers)


def _members(ids) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for i, g in enumerate(ids):
        out.setdefault(int(g), []).append(i)
    return out


def _std(vals: list[float], ddof: int) -> float:
    if len(vals) == 1:
        return 0.0
    return statistics.pstdev(vals) if ddof == 0 else statistics.stdev(vals)


def _ref_normalized(rewards, keys, ddof, alpha, eps) -> list[float]:
    """(r_i - mean_c) / (std_c + eps)^alpha within each cell c of `keys`; 0 in a cell whose
    rewards are all equal (singletons included)."""
    out = [0.0] * len(rewards)
    for members in _members_by_key(keys).values():
        vals = [float(rewards[i]) for i in members]
        if max(vals) == min(vals):
            continue
        mu, sd = statistics.fmean(vals), _std(vals, ddof)
        for i in members:
            out[i] = (float(rewards[i]) - mu) / (sd + eps) ** alpha
    return out


def _members_by_key(keys) -> dict[object, list[int]]:
    out: dict[object, list[int]] = {}
    for i, key in enumerate(keys):
        out.setdefault(key, []).append(i)
    return out


def _ref_stratified(rewards, ids, strata, ddof, alpha, eps, beta) -> list[float]:
    """Stratified GRPO: A = beta A^(s) + (1 - beta) A_group, A^(s) within (group, stratum)."""
    a_group = _ref_normalized(rewards, [int(g) for g in ids], ddof, alpha, eps)
    cells = [(int(g), int(s)) for g, s in zip(ids, strata, strict=True)]
    a_strat = _ref_normalized(rewards, cells, ddof, alpha, eps)
    return [beta * s + (1 - beta) * g for s, g in zip(a_strat, a_group, strict=True)]


def _sgn(x: float) -> float:
    return (x > 0) - (x < 0)


def _ref_hadw(adv, rewards, ids, anchor_of_group, scale) -> list[float]:
    """HA-DW: A_i Phi_i, Phi_i = scale exp(-sgn(r_i - p_hat_g) (p_hat_g - C_g)), p_hat_g the
    group's mean: the sign of the group advantage of the raw rewards, whatever A_i is."""
    out = list(adv)
    for g, members in _members(ids).items():
        p_hat = statistics.fmean(float(rewards[i]) for i in members)
        c = anchor_of_group(g)
        for i in members:
            out[i] = adv[i] * scale * math.exp(-_sgn(float(rewards[i]) - p_hat) * (p_hat - c))
    return out


def _softmax(xs: list[float]) -> list[float]:
    top = max(xs)
    e = [math.exp(x - top) for x in xs]
    return [v / sum(e) for v in e]


@dataclass
class LambdaRef:
    f: list[float]  # response factors
    df: list[float]  # d f_i / d lambda
    h: list[float]  # the floored lift 1 + r z


def _ref_lambda(lengths: list[int], ids, lam: float, r: float) -> LambdaRef:
    """lambda-GRPO: z standardized length (population std; 0 if std 0), h = max(1 + r z, 1e-3),
    g = h^lambda, f = G softmax_group(g); df from the softmax derivative, g' = h^lambda log h."""
    f, df, hs = [0.0] * len(lengths), [0.0] * len(lengths), [0.0] * len(lengths)
    for members in _members(ids).values():
        n = [float(lengths[i]) for i in members]
        mu, sd = statistics.fmean(n), statistics.pstdev(n)
        z = [(x - mu) / sd if sd > 0 else 0.0 for x in n]
        h = [max(1 + r * zi, H_FLOOR) for zi in z]
        g = [hi**lam for hi in h]
        dg = [hi**lam * math.log(hi) for hi in h]
        s = _softmax(g)
        mean_dg = sum(si * di for si, di in zip(s, dg, strict=True))
        for j, i in enumerate(members):
            f[i] = len(members) * s[j]
            df[i] = len(members) * s[j] * (dg[j] - mean_dg)
            hs[i] = h[j]
    return LambdaRef(f, df, hs)


def _ref_lambda_loss(token_loss, mask, ids, lam, r) -> float:
    """J = sum_i f_i sum_t m_it l_it / max(sum_i |o_i|, 1)."""
    lengths = [int(sum(row)) for row in mask.tolist()]
    f = _ref_lambda(lengths, ids, lam, r).f
    rows = [
        sum(v for v, m in zip(lrow, mrow, strict=True) if m)
        for lrow, mrow in zip(token_loss.tolist(), mask.tolist(), strict=True)
    ]
    return sum(fi * li for fi, li in zip(f, rows, strict=True)) / max(sum(lengths), 1)


# ------------------------------------------------------------------ random batches


def _shuffled_ids(sizes: list[int], rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Flat group ids (arbitrary, signed, non-contiguous) for groups of `sizes`, rows shuffled;
    and the permutation applied."""
    gids = rng.choice(10**6, size=len(sizes), replace=False) - 500_000
    ids = np.concatenate([np.full(n, g) for n, g in zip(sizes, gids, strict=True)])
    perm = rng.permutation(len(ids))
    return ids[perm], perm


# each group: (size, kind) - kinds force zero-variance groups and singletons into every case
group_specs = st.lists(
    st.tuples(st.integers(1, 7), st.sampled_from(["mixed", "flat", "binary"])),
    min_size=1,
    max_size=6,
)


def _rewards_for(spec, rng: np.random.Generator) -> np.ndarray:
    out = []
    for size, kind in spec:
        if kind == "flat":
            out.append(np.full(size, float(rng.integers(0, 2))))
        elif kind == "binary":
            out.append(rng.integers(0, 2, size).astype(float))
        else:
            out.append(rng.choice([0.0, 0.25, 1.0, 2.5], size))
    return np.concatenate(out)


# ------------------------------------------------------------------ Stratified GRPO


@FAST
@given(
    spec=group_specs,
    n_strata=st.integers(1, 3),
    ddof=st.sampled_from([0, 1]),
    alpha=st.sampled_from([0.0, 0.5, 1.0]),
    beta=st.sampled_from([0.0, 0.3, 1.0]),
    eps=st.sampled_from([0.0, 1e-6]),
    seed=st.integers(0, 2**32 - 1),
)
def test_stratified_matches_loop_reference(spec, n_strata, ddof, alpha, beta, eps, seed):
    rng = np.random.default_rng(seed)
    ids, perm = _shuffled_ids([s for s, _ in spec], rng)
    r = _rewards_for(spec, rng)[perm]
    strata = rng.integers(0, n_strata, len(r)) * 7 - 3  # arbitrary integer labels
    dial = Dial(std_ddof=ddof, std_power=alpha, eps=eps, strata="k", strata_blend=beta)
    got = advantages(
        torch.tensor(r), torch.tensor(ids), dial, strata=torch.tensor(strata, dtype=torch.long)
    )
    want = _ref_stratified(r, ids, strata, ddof, alpha, eps, beta)
    torch.testing.assert_close(got, torch.tensor(want, dtype=F64), rtol=1e-12, atol=1e-12)
    assert torch.isfinite(got).all()


def test_stratified_hand_numbers():
    """One group of 4, strata {0,0,1,1}, rewards (1,0,1,1), population std, alpha=1, eps=0:
    group A = (1/sqrt(3), -sqrt(3), 1/sqrt(3), 1/sqrt(3)); stratum 0 is (1, -1), stratum 1
    is silent (0, 0); beta = 0.5 averages them."""
    r = torch.tensor([1.0, 0.0, 1.0, 1.0], dtype=F64)
    dial = Dial(eps=0.0, strata="k", strata_blend=0.5)
    got = advantages(r, torch.zeros(4, dtype=torch.long), dial, strata=torch.tensor([0, 0, 1, 1]))
    s3 = math.sqrt(3)
    want = [0.5 * (1 + 1 / s3), 0.5 * (-1 - s3), 0.5 / s3, 0.5 / s3]
    torch.testing.assert_close(got, torch.tensor(want, dtype=F64), rtol=1e-14, atol=0)


@FAST
@given(spec=group_specs, ddof=st.sampled_from([0, 1]), alpha=st.sampled_from([0.0, 0.5, 1.0]),
       seed=st.integers(0, 2**32 - 1))  # fmt: skip
def test_stratified_reduces_to_the_group_estimator(spec, ddof, alpha, seed):
    """beta = 0 is the group estimator exactly; so is one stratum everywhere at beta = 1."""
    rng = np.random.default_rng(seed)
    ids, perm = _shuffled_ids([s for s, _ in spec], rng)
    r, gid = torch.tensor(_rewards_for(spec, rng)[perm]), torch.tensor(ids)
    base = Dial(std_ddof=ddof, std_power=alpha)
    plain = advantages(r, gid, base)
    mixed = torch.tensor(rng.integers(0, 3, len(r)))
    blend0 = Dial(std_ddof=ddof, std_power=alpha, strata="k", strata_blend=0.0)
    assert torch.equal(advantages(r, gid, blend0, strata=mixed), plain)
    one = Dial(std_ddof=ddof, std_power=alpha, strata="k", strata_blend=1.0)
    same = torch.full((len(r),), 5, dtype=torch.long)
    assert torch.equal(advantages(r, gid, one, strata=same), plain)


@pytest.mark.parametrize(
    "strata",
    [None, torch.zeros(3, dtype=torch.long), torch.zeros(4, dtype=F64), torch.zeros(2, 2)],
)
def test_stratified_needs_integer_strata_per_response(strata):
    dial = Dial(strata="truncated")
    r, gid = torch.tensor([1.0, 0.0, 1.0, 0.0]), torch.tensor([0, 0, 1, 1])
    with pytest.raises(ValueError, match="strata") as err:
        advantages(r, gid, dial, strata=strata)
    assert "\n" not in str(err.value)


# ------------------------------------------------------------------ HA-DW


@FAST
@given(
    spec=group_specs,
    scale=st.sampled_from([1.0, 0.5, 2.0]),
    c=st.floats(0.0, 1.0),
    per_group=st.booleans(),
    alpha=st.sampled_from([0.0, 1.0]),
    seed=st.integers(0, 2**32 - 1),
)
def test_hadw_matches_loop_reference(spec, scale, c, per_group, alpha, seed):
    """Float anchor and (M,) per-group anchor, row j of it for the j-th smallest group id."""
    rng = np.random.default_rng(seed)
    ids, perm = _shuffled_ids([s for s, _ in spec], rng)
    r = _rewards_for(spec, rng)[perm]
    sorted_ids = sorted(set(ids.tolist()))
    per = rng.random(len(sorted_ids))
    anchor = torch.tensor(per) if per_group else c
    dial = Dial(std_power=alpha, anchor="batch", anchor_scale=scale)
    got = advantages(torch.tensor(r), torch.tensor(ids), dial, anchor=anchor)
    plain = _ref_normalized(r, ids.tolist(), 0, alpha, dial.eps)
    c_of = (lambda g: per[sorted_ids.index(g)]) if per_group else (lambda g: c)
    want = _ref_hadw(plain, r, ids, c_of, scale)
    torch.testing.assert_close(got, torch.tensor(want, dtype=F64), rtol=1e-12, atol=1e-12)
    assert (got[torch.tensor(plain) == 0] == 0).all()  # silent / singleton rows stay 0


@FAST
@given(spec=group_specs, beta=st.sampled_from([0.3, 1.0]), seed=st.integers(0, 2**32 - 1))
def test_hadw_acts_on_the_stratified_advantage(spec, beta, seed):
    """Both fixes at once: Phi reweights the blended A with the sign of the group's raw-reward
    advantage (strata first, then anchor)."""
    rng = np.random.default_rng(seed)
    ids, perm = _shuffled_ids([s for s, _ in spec], rng)
    r = _rewards_for(spec, rng)[perm]
    strata = rng.integers(0, 2, len(r))
    dial = Dial(strata="k", strata_blend=beta, anchor="prompt", anchor_scale=1.5)
    got = advantages(
        torch.tensor(r), torch.tensor(ids), dial, strata=torch.tensor(strata), anchor=0.4
    )
    blended = _ref_stratified(r, ids, strata, 0, 1.0, dial.eps, beta)
    want = _ref_hadw(blended, r, ids, lambda g: 0.4, 1.5)
    torch.testing.assert_close(got, torch.tensor(want, dtype=F64), rtol=1e-12, atol=1e-12)


def test_hadw_hand_numbers_and_anchor_at_p_hat():
    """G = 4, k = 1 (p_hat = 1/4) against C = 1/2: a prompt harder than the anchor, so the
    correct answer's A grows by e^(1/4) and the wrong ones shrink by e^(-1/4). With C = p_hat
    of every group Phi = scale, so A = scale * A_group."""
    r = torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0], dtype=F64)
    gid = torch.tensor([3, 3, 3, 3, -1, -1, 9])  # sorted: -1 (p=1, silent), 3 (p=1/4), 9 (p=0)
    plain = advantages(r, gid, Dial())
    got = advantages(r, gid, Dial(anchor="batch", anchor_scale=1.0), anchor=0.5)
    e = math.exp(0.25)
    want = plain * torch.tensor([e, 1 / e, 1 / e, 1 / e, 1.0, 1.0, 1.0], dtype=F64)
    torch.testing.assert_close(got, want, rtol=1e-14, atol=0)
    p_hat = torch.tensor([1.0, 0.25, 0.0], dtype=F64)  # per group, sorted id order
    scaled = advantages(r, gid, Dial(anchor="prompt", anchor_scale=1.7), anchor=p_hat)
    torch.testing.assert_close(scaled, 1.7 * plain, rtol=1e-15, atol=0)
    wrong_order = advantages(r, gid, Dial(anchor="prompt"), anchor=p_hat.roll(1))
    # the order of the (M,) anchor matters
    assert not torch.allclose(wrong_order, Dial().anchor_scale * plain)


def test_hadw_weights_formula():
    adv = torch.tensor([0.7, -0.2, 0.0, 1.3], dtype=F64)
    p_hat = torch.tensor([0.2, 0.2, 0.5, 0.9], dtype=F64)
    c = torch.tensor([0.6, 0.6, 0.1, 0.3], dtype=F64)
    want = [2.0 * math.exp(-_sgn(a) * (p - k)) for a, p, k in zip([0.7, -0.2, 0.0, 1.3],
            [0.2, 0.2, 0.5, 0.9], [0.6, 0.6, 0.1, 0.3], strict=True)]  # fmt: skip
    torch.testing.assert_close(hadw_weights(adv, p_hat, c, 2.0), torch.tensor(want, dtype=F64))


@pytest.mark.parametrize("anchor", [None, torch.tensor([0.5, 0.5, 0.5])])
def test_hadw_needs_an_anchor_of_the_right_shape(anchor):
    r, gid = torch.tensor([1.0, 0.0, 1.0, 0.0]), torch.tensor([0, 0, 1, 1])
    with pytest.raises(ValueError, match="anchor") as err:
        advantages(r, gid, Dial(anchor="batch"), anchor=anchor)
    assert "\n" not in str(err.value)


# ------------------------------------------------------------------ lambda-GRPO


@st.composite
def lambda_batches(draw):
    """(lengths per row, group sizes): groups of mixed lengths, all-equal lengths, singletons
    and empty responses."""
    groups = draw(
        st.lists(
            st.one_of(
                st.lists(st.integers(0, 9), min_size=2, max_size=7),
                st.tuples(st.integers(0, 9), st.integers(2, 5)).map(lambda t: [t[0]] * t[1]),
                st.integers(0, 9).map(lambda n: [n]),
            ),
            min_size=1,
            max_size=5,
        )
    )
    return [n for g in groups for n in g], [len(g) for g in groups]


def _mask_and_loss(lengths, rng, width=None, poison=True):
    """Right-padded mask (B, T) of these lengths; token loss with NaN / inf in the padding."""
    t = max(max(lengths), 1) if width is None else width
    mask = torch.zeros(len(lengths), t, dtype=torch.long)
    for i, n in enumerate(lengths):
        mask[i, :n] = 1
    loss = torch.tensor(rng.normal(size=(len(lengths), t)))
    if poison:
        loss = torch.where(mask.bool(), loss, torch.tensor([math.nan, math.inf])[mask.sum() % 2])
    return mask, loss


@FAST
@given(
    batch=lambda_batches(),
    lam=st.floats(-3.0, 3.0),
    r=st.sampled_from([0.25, 0.1, 1.0]),
    seed=st.integers(0, 2**32 - 1),
)
def test_lambda_aggregation_matches_loop_reference(batch, lam, r, seed):
    """r = 1 lets 1 + r z go below 0 in groups of 3+, so the 1e-3 floor is exercised."""
    lengths, sizes = batch
    rng = np.random.default_rng(seed)
    ids, perm = _shuffled_ids(sizes, rng)
    lengths = [lengths[i] for i in perm]
    mask, loss = _mask_and_loss(lengths, rng)
    dial = Dial(length_norm="lambda", lambda_value=lam, lambda_r=r)
    got = aggregate(loss, mask, dial, torch.tensor(ids))
    assert math.isfinite(float(got))
    want = _ref_lambda_loss(loss, mask, ids.tolist(), lam, r)
    assert float(got) == pytest.approx(want, rel=1e-10, abs=1e-12)
    f = lambda_factors(mask.sum(-1), torch.tensor(ids), lam, r)
    ref = _ref_lambda(lengths, ids.tolist(), lam, r)
    torch.testing.assert_close(f, torch.tensor(ref.f, dtype=F64), rtol=1e-10, atol=1e-12)
    for members in _members(ids.tolist()).values():  # mean 1 within each group
        assert sum(ref.f[i] for i in members) == pytest.approx(len(members), rel=1e-12)


def test_lambda_hand_numbers():
    """Lengths (1, 3) in one group: z = (-1, 1), r = 0.5, h = (0.5, 1.5), lambda = 1: g = h,
    f = 2 softmax(0.5, 1.5) = 2 (1, e) / (1 + e)."""
    mask = torch.tensor([[1, 0, 0], [1, 1, 1]])
    f = lambda_factors(mask.sum(-1), torch.zeros(2, dtype=torch.long), 1.0, 0.5)
    e = math.e
    torch.testing.assert_close(f, torch.tensor([2 / (1 + e), 2 * e / (1 + e)], dtype=F64))


@given(batch=lambda_batches(), seed=st.integers(0, 2**32 - 1))
@FAST
def test_lambda_zero_is_dapo_token_mean_exactly(batch, seed):
    lengths, sizes = batch
    rng = np.random.default_rng(seed)
    ids, _ = _shuffled_ids(sizes, rng)
    mask, loss = _mask_and_loss(lengths, rng, width=max(lengths) + 2)
    dial = Dial(length_norm="lambda", lambda_value=0.0)
    assert aggregate(loss, mask, dial, torch.tensor(ids)) == token_mean(loss, mask)
    assert torch.equal(lambda_weights(mask, torch.tensor(ids), 0.0), token_weights(mask))
    assert torch.equal(make_token_weights(dial)(mask, torch.tensor(ids)), token_weights(mask))


def test_lambda_all_empty_or_one_group_is_finite():
    mask = torch.zeros(3, 4, dtype=torch.long)
    loss = torch.full((3, 4), math.nan)
    dial = Dial(length_norm="lambda", lambda_value=2.0)
    assert aggregate(loss, mask, dial, torch.tensor([0, 0, 1])) == 0.0
    # group_ids None: the rows are one group
    mask, loss = _mask_and_loss([1, 4, 2, 0], np.random.default_rng(0))
    want = _ref_lambda_loss(loss, mask, [0, 0, 0, 0], 2.0, dial.lambda_r)
    assert float(aggregate(loss, mask, dial)) == pytest.approx(want, rel=1e-12)


@given(batch=lambda_batches(), l_max=st.integers(0, 4), seed=st.integers(0, 2**32 - 1))
@FAST
def test_unified_form_has_grpo_dapo_dr_grpo_as_presets(batch, l_max, seed):
    """f_i = S / (B |o_i|) is GRPO's sequence mean, f = 1 DAPO's token mean, f_i = S / (B L_max)
    Dr. GRPO's constant normalizer (S = sum_j |o_j|); an empty row has weight 0 in every form,
    so its f is immaterial (taken with |o_i| clamped to 1 like the sequence mean)."""
    lengths, _ = batch
    rng = np.random.default_rng(seed)
    mask, _ = _mask_and_loss(lengths, rng, width=max(lengths) + 1)
    b, s = len(lengths), max(sum(lengths), 1)
    l_max = mask.shape[1] + l_max
    grpo = torch.tensor([s / (b * max(n, 1)) for n in lengths], dtype=F64)
    torch.testing.assert_close(
        unified_weights(mask, grpo), sequence_weights(mask), rtol=1e-15, atol=0
    )
    torch.testing.assert_close(
        unified_weights(mask, torch.ones(b, dtype=F64)), token_weights(mask), rtol=1e-15, atol=0
    )
    dr = torch.full((b,), s / (b * l_max), dtype=F64)
    torch.testing.assert_close(
        unified_weights(mask, dr), constant_weights(mask, l_max), rtol=1e-15, atol=0
    )


@given(
    batch=lambda_batches(),
    lam=st.floats(0.05, 3.0),
    r=st.sampled_from([0.25, 1.0]),
    seed=st.integers(0, 2**32 - 1),
)
@FAST
def test_lambda_positive_favours_long_responses(batch, lam, r, seed):
    """lambda > 0, r > 0: f rises with length within a group, the group's longest response
    gets f > 1 and its shortest f < 1; lambda < 0 reverses the order. (Not every longer-than-
    mean response gets f > 1 at large lambda: the softmax concentrates on the longest.)"""
    lengths, sizes = batch
    ids = np.repeat(np.arange(len(sizes)), sizes)
    n = torch.tensor(lengths)
    up = lambda_factors(n, torch.tensor(ids), lam, r).tolist()
    down = lambda_factors(n, torch.tensor(ids), -lam, r).tolist()
    for members in _members(ids.tolist()).values():
        order = sorted(members, key=lambda i: lengths[i])
        assert all(up[a] <= up[b] * (1 + 1e-12) for a, b in pairwise(order))
        assert all(down[a] * (1 + 1e-12) >= down[b] for a, b in pairwise(order))
        if lengths[order[0]] < lengths[order[-1]]:
            assert up[order[-1]] > 1 > up[order[0]]
            assert down[order[-1]] < 1 < down[order[0]]


def test_lambda_positive_two_length_group_longer_than_mean_gets_more():
    """A group with two lengths: every longer-than-mean response has f > 1 for lambda > 0."""
    lengths = [2, 2, 2, 6, 6]
    f = lambda_factors(torch.tensor(lengths), torch.zeros(5, dtype=torch.long), 0.5, 0.25)
    mean = statistics.fmean(lengths)
    assert all((fi > 1) == (n > mean) for fi, n in zip(f.tolist(), lengths, strict=True))


@given(
    batch=lambda_batches(),
    lam=st.floats(-2.0, 2.0),
    r=st.sampled_from([0.25, 1.0]),
    seed=st.integers(0, 2**32 - 1),
)
@FAST
def test_lambda_objective_gradient(batch, lam, r, seed):
    """d J / d lambda by autograd = the central finite difference = sum_i f_i'(lambda) L_i /
    sum |o| with the loop's softmax derivative f_i' = G s_i (g_i' - sum_j s_j g_j')."""
    lengths, sizes = batch
    rng = np.random.default_rng(seed)
    ids, _ = _shuffled_ids(sizes, rng)
    mask, _ = _mask_and_loss(lengths, rng)
    row_loss = torch.tensor(rng.normal(size=len(lengths))) * (mask.sum(-1) > 0)  # L_i, 0 if empty
    gid = torch.tensor(ids)
    lam_t = torch.tensor(lam, dtype=F64, requires_grad=True)
    lambda_objective(row_loss, mask, gid, lam_t, r).backward()
    ref = _ref_lambda(lengths, ids.tolist(), lam, r)
    analytic = sum(d * li for d, li in zip(ref.df, row_loss.tolist(), strict=True))
    analytic /= max(sum(lengths), 1)
    # df_i = f_i (g_i' - sum_j s_j g_j') cancels terms of size f_i (|g_i'| + sum_j s_j |g_j'|);
    # at the h floor with lambda near -2 they reach ~1e6 while df is ~0, so both sides carry an
    # absolute rounding error of a few ulps of that size (at most 0.2 ulp in 3,000 draws): the
    # tolerance is 16 ulps of it, not a fixed 1e-12
    size = _cancelled_size(ref, ids.tolist(), lam, row_loss.tolist()) / max(sum(lengths), 1)
    ulps = 16 * np.finfo(np.float64).eps * size
    assert float(lam_t.grad) == pytest.approx(analytic, rel=1e-9, abs=1e-12 + ulps)
    step = 1e-6

    def j(x):
        return float(lambda_objective(row_loss, mask, gid, torch.tensor(x, dtype=F64), r))

    fd = (j(lam + step) - j(lam - step)) / (2 * step)
    assert float(lam_t.grad) == pytest.approx(fd, rel=1e-5, abs=1e-8)
    value = _ref_lambda_loss(row_loss[:, None] * _first_token(mask), mask, ids.tolist(), lam, r)
    assert j(lam) == pytest.approx(value, rel=1e-10, abs=1e-12)


def _cancelled_size(ref: LambdaRef, ids: list[int], lam: float, row_loss: list[float]) -> float:
    """sum_i f_i (|g_i'| + sum_{j in g} s_j |g_j'|) |L_i|, g' = h^lambda log h: the size of the
    terms the softmax derivative subtracts, which bounds its rounding error."""
    dg = [h**lam * abs(math.log(h)) for h in ref.h]
    total = 0.0
    for members in _members(ids).values():
        mean_dg = sum(ref.f[i] / len(members) * dg[i] for i in members)
        total += sum(ref.f[i] * (dg[i] + mean_dg) * abs(row_loss[i]) for i in members)
    return total


def _first_token(mask: torch.Tensor) -> torch.Tensor:
    """(B, T) 1 at each row's first masked token: a token loss whose row sums are 1 (0 empty)."""
    first = torch.zeros(mask.shape, dtype=F64)
    for i, row in enumerate(mask.tolist()):
        if any(row):
            first[i, row.index(1)] = 1.0
    return first


def test_lambda_objective_gradient_reaches_a_float32_parameter():
    """The trainer's lambda is a float32 Parameter: its gradient arrives (cast inside)."""
    mask = torch.tensor([[1, 1, 0], [1, 0, 0], [1, 1, 1]])
    row_loss = torch.tensor([0.3, -1.0, 0.5])
    lam = torch.nn.Parameter(torch.tensor(0.2))
    lambda_objective(row_loss, mask, None, lam, 0.25).backward()
    ref = _ref_lambda([2, 1, 3], [0, 0, 0], 0.2, 0.25)
    want = sum(d * li for d, li in zip(ref.df, [0.3, -1.0, 0.5], strict=True)) / 6
    assert lam.grad is not None and float(lam.grad) == pytest.approx(want, rel=1e-5)


def test_make_token_weights_reads_lam_over_the_dial():
    mask, _ = _mask_and_loss([1, 3, 2, 5], np.random.default_rng(1))
    gid = torch.tensor([0, 0, 1, 1])
    weights = make_token_weights(Dial(length_norm="lambda", lambda_value=0.0, lambda_r=0.2))
    at = weights(mask, gid, torch.tensor(1.5))
    ref = _ref_lambda([1, 3, 2, 5], [0, 0, 1, 1], 1.5, 0.2).f
    want = mask.double() * torch.tensor(ref, dtype=F64)[:, None] / 11
    torch.testing.assert_close(at, want, rtol=1e-12, atol=0)
    assert torch.equal(weights(mask, gid), token_weights(mask))  # lam None: lambda_value 0


def test_row_sums_skip_padding():
    loss = torch.tensor([[1.0, 2.0, math.nan], [math.inf, 3.0, 4.0]])
    weights = torch.tensor([[0.5, 0.5, 0.0], [0.0, 0.2, 0.1]])
    assert row_sums(loss, weights).tolist() == [3.0, 7.0]


# ------------------------------------------------------------------ bad settings


@pytest.mark.parametrize(
    "cfg, key",
    [
        ({"length_norm": "lambda", "lambda_r": 0.0}, "lambda_r"),
        ({"length_norm": "lambda", "lambda_r": -0.25}, "lambda_r"),
        ({"anchor": "batch", "anchor_rate": 0}, "anchor_rate"),
        ({"anchor": "batch", "anchor_rate": -0.1}, "anchor_rate"),
        ({"anchor": "batch", "anchor_rate": 1.01}, "anchor_rate"),
        ({"strata": ""}, "strata"),
        ({"lambda_learnable": True}, "lambda_learnable"),
        ({"preset": "grpo", "lambda_learnable": True}, "lambda_learnable"),
        ({"preset": "lambda_grpo", "length_norm": "token"}, "lambda_learnable"),
    ],
)
def test_bad_estimator_settings_fail_with_one_line_naming_the_key(cfg, key):
    with pytest.raises(ValueError, match=key) as err:
        dial_from_config(cfg)
    assert "\n" not in str(err.value)


def test_edge_settings_are_allowed():
    assert Dial(anchor="batch", anchor_rate=1.0).anchor_rate == 1.0
    assert Dial(length_norm="lambda", lambda_value=-2.0, lambda_r=1e-9).lambda_r == 1e-9


def test_task_strata_keys():
    with_tail = ArithmeticTask(tail_checks=2)
    why = stratum_error(ArithmeticTask(), "check_lines")
    assert why is not None and "'check_lines'" in why and "\n" not in why
    assert stratum_error(with_tail, "check_lines") is None
    assert provided_strata(with_tail) == (*GENERIC_STRATA, "check_lines")
    for task in (ArithmeticTask(), with_tail, object()):  # generic keys: every task
        for key in (*GENERIC_STRATA, None):
            assert stratum_error(task, key) is None
    assert "nope" in stratum_error(with_tail, "nope")
    problem = with_tail.problems("train", 1, 0)[0]
    assert with_tail.stratum(problem, "1+2=3;#3&2+1=3&1+2=3", "check_lines") == 2
    with pytest.raises(ValueError, match="check_lines"):
        ArithmeticTask().stratum(problem, "#3", "check_lines")
