"""Tests for grpo_dial.core.advantage: every expected value is computed a second, independent
way.
"""

from __future__ import annotations

import math
import re
import statistics
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from grpo_dial.core.advantage import (
    advantages,
    aggregate,
    clipped_surrogate,
    constant_normalizer,
    group_stats,
    group_update,
    keep_mask,
    make_aggregator,
    policy_loss,
    sequence_mean,
    silent_groups,
    silent_mask,
    token_mean,
)
from grpo_dial.core.dial import PRESETS, Dial, dial_from_config, dial_settings, preset

F64 = torch.float64
FAST = settings(max_examples=60, deadline=None)


def _t(x) -> torch.Tensor:
    return torch.as_tensor(np.asarray(x), dtype=F64)


def _flat_batch(groups: list[list[float]], rng: np.random.Generator):
    """Groups -> shuffled flat (rewards, ids) with arbitrary, non-contiguous, signed ids."""
    gids = rng.choice(10**6, size=len(groups), replace=False) - 500_000
    ids = np.concatenate([np.full(len(g), gid) for g, gid in zip(groups, gids, strict=True)])
    rewards = np.concatenate([np.asarray(g, dtype=float) for g in groups])
    perm = rng.permutation(len(rewards))
    return rewards[perm], ids[perm], perm


def _reference_advantages(rewards, ids, ddof, alpha, eps) -> list[float]:
    """Per-group Python loop with exact `statistics` std; a zero-std group gets 0 by definition."""
    out = [0.0] * len(rewards)
    for g in set(ids.tolist()):
        members = [i for i in range(len(rewards)) if ids[i] == g]
        vals = [float(rewards[i]) for i in members]
        mu = statistics.fmean(vals)
        if len(vals) == 1:
            sd = 0.0
        else:
            sd = statistics.pstdev(vals) if ddof == 0 else statistics.stdev(vals)
        if sd == 0:
            continue
        for i in members:
            out[i] = (rewards[i] - mu) / (sd + eps) ** alpha
    return out


# ---------------------------------------------------------------- the identity (DESIGN 1.2)

binary_groups = st.lists(
    st.integers(2, 16).flatmap(lambda g: st.tuples(st.just(g), st.integers(1, g - 1))),
    min_size=1,
    max_size=6,
)


@FAST
@given(
    groups=binary_groups,
    dim=st.integers(3, 6),
    alpha=st.sampled_from([1.0, 0.0, 0.5]),
    seed=st.integers(0, 2**32 - 1),
)
def test_update_identity_sigma_power(groups, dim, alpha, seed):
    """(1/G) sum A_i s_i = sigma^(2-alpha) (s+ - s-), sigma = sqrt(k(G-k))/G, many groups."""
    rng = np.random.default_rng(seed)
    rewards = [[1.0] * k + [0.0] * (g - k) for g, k in groups]
    scores = [rng.normal(size=(g, dim)) for g, _ in groups]
    r, ids, perm = _flat_batch(rewards, rng)
    s = np.concatenate(scores)[perm]
    got = group_update(_t(s), _t(r), torch.as_tensor(ids), Dial(std_power=alpha, eps=0.0))
    starts = np.cumsum(
        [0] + [g for g, _ in groups]
    )  # original position of each group's first member
    sorted_ids = np.unique(ids)  # rows of group_update follow sorted group ids
    for (g, k), sc, start in zip(groups, scores, starts, strict=False):
        sigma = math.sqrt(k * (g - k)) / g
        expected = sigma ** (2 - alpha) * (sc[:k].mean(0) - sc[k:].mean(0))
        row = np.searchsorted(sorted_ids, ids[np.flatnonzero(perm == start)[0]])
        np.testing.assert_allclose(got[row].numpy(), expected, rtol=1e-9, atol=1e-12)


@FAST
@given(
    groups=st.lists(
        st.lists(st.sampled_from([-2.0, -0.5, 0.0, 0.5, 1.0, 3.0]), min_size=1, max_size=8),
        min_size=1,
        max_size=6,
    ),
    shift=st.floats(-100, 100),
    alpha=st.floats(0, 1),
    ddof=st.sampled_from([0, 1]),
    eps=st.sampled_from([0.0, 1e-6, 1e-4]),
    seed=st.integers(0, 2**32 - 1),
)
def test_shift_invariance(groups, shift, alpha, ddof, eps, seed):
    rng = np.random.default_rng(seed)
    r, ids, _ = _flat_batch(groups, rng)
    scores = _t(rng.normal(size=(len(r), 4)))
    dial = Dial(std_power=alpha, std_ddof=ddof, eps=eps)
    gid = torch.as_tensor(ids)
    a0, a1 = advantages(_t(r), gid, dial), advantages(_t(r + shift), gid, dial)
    torch.testing.assert_close(a1, a0, rtol=1e-7, atol=1e-7)
    u0, u1 = group_update(scores, _t(r), gid, dial), group_update(scores, _t(r + shift), gid, dial)
    torch.testing.assert_close(u1, u0, rtol=1e-7, atol=1e-7)


@FAST
@given(
    groups=st.lists(
        st.lists(st.sampled_from([0.0, 0.25, 1.0, 2.0]), min_size=1, max_size=8),
        min_size=1,
        max_size=6,
    ),
    c=st.floats(0.01, 100),
    alpha=st.sampled_from([1.0, 0.0, 0.3]),
    ddof=st.sampled_from([0, 1]),
    seed=st.integers(0, 2**32 - 1),
)
def test_scale_behaviour(groups, c, alpha, ddof, seed):
    """A(c r) = c^(1-alpha) A(r) at eps = 0: GRPO (alpha=1) is scale invariant, Dr. GRPO linear."""
    r, ids, _ = _flat_batch(groups, np.random.default_rng(seed))
    dial = Dial(std_power=alpha, std_ddof=ddof, eps=0.0)
    gid = torch.as_tensor(ids)
    a0, a1 = advantages(_t(r), gid, dial), advantages(_t(r * c), gid, dial)
    torch.testing.assert_close(a1, a0 * c ** (1 - alpha), rtol=1e-9, atol=1e-9)


# ---------------------------------------------------------------- loop reference

group_spec = st.lists(
    st.tuples(st.integers(1, 8), st.sampled_from(["binary", "real", "constant"])),
    min_size=1,
    max_size=8,
)


def _make_groups(spec, rng) -> list[list[float]]:
    out = []
    for g, kind in spec:
        if kind == "binary":
            out.append(rng.integers(0, 2, size=g).astype(float).tolist())
        elif kind == "real":
            out.append(rng.normal(size=g).tolist())
        else:  # not binary fractions: a rounded k/G leaves tiny deviations, and A = tiny/tiny = +-1
            out.append([float(rng.choice([0.1, 0.7]))] * g)
    return out


@FAST
@given(
    spec=group_spec,
    ddof=st.sampled_from([0, 1]),
    alpha=st.sampled_from([0.0, 0.5, 1.0]),
    eps=st.sampled_from([0.0, 1e-6, 1e-4]),
    seed=st.integers(0, 2**32 - 1),
)
def test_vectorized_matches_loop_reference(spec, ddof, alpha, eps, seed):
    rng = np.random.default_rng(seed)
    r, ids, _ = _flat_batch(_make_groups(spec, rng), rng)
    dial = Dial(std_power=alpha, std_ddof=ddof, eps=eps)
    got = advantages(_t(r), torch.as_tensor(ids), dial)
    expected = _reference_advantages(r, ids, ddof, alpha, eps)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-9, atol=1e-12)

    stats = group_stats(_t(r), torch.as_tensor(ids), ddof)
    uniq = sorted(set(ids.tolist()))
    assert stats.ids.tolist() == uniq
    assert stats.ids[stats.index].tolist() == ids.tolist()
    for j, g in enumerate(uniq):
        vals = r[ids == g].tolist()
        assert stats.size[j] == len(vals)
        assert stats.k[j].item() == pytest.approx(sum(vals), abs=1e-12)
        assert stats.mean[j].item() == pytest.approx(statistics.fmean(vals), abs=1e-12)
        sd = 0.0 if len(vals) == 1 else [statistics.pstdev, statistics.stdev][ddof](vals)
        assert stats.sigma[j].item() == pytest.approx(sd, abs=1e-12)
        assert silent_groups(stats)[j].item() == (len(set(vals)) == 1)
    silent = np.array([len(set(r[ids == g].tolist())) == 1 for g in ids])
    assert silent_mask(_t(r), torch.as_tensor(ids)).tolist() == silent.tolist()
    assert (
        keep_mask(_t(r), torch.as_tensor(ids), Dial(silent="drop")).tolist() == (~silent).tolist()
    )
    assert keep_mask(_t(r), torch.as_tensor(ids), Dial(silent="keep")).all()


@FAST
@given(
    groups=st.lists(
        st.integers(1, 16).flatmap(lambda g: st.tuples(st.just(g), st.integers(0, g))),
        min_size=1,
        max_size=6,
    ),
    seed=st.integers(0, 2**32 - 1),
)
def test_sample_std_shrinks_by_sqrt_g_minus_one_over_g(groups, seed):
    rng = np.random.default_rng(seed)
    r, ids, _ = _flat_batch([[1.0] * k + [0.0] * (g - k) for g, k in groups], rng)
    gid = torch.as_tensor(ids)
    pop = advantages(_t(r), gid, Dial(std_ddof=0, eps=0.0))
    samp = advantages(_t(r), gid, Dial(std_ddof=1, eps=0.0))
    size = np.array([np.sum(ids == g) for g in ids])
    torch.testing.assert_close(samp, pop * _t(np.sqrt((size - 1) / size)), rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------- degenerate inputs


@pytest.mark.parametrize("ddof", [0, 1])
@pytest.mark.parametrize("alpha", [0.0, 0.5, 1.0])
def test_no_nan_for_silent_and_singleton_groups(ddof, alpha):
    r = _t([1, 1, 1, 0, 0.1, 0.1, 0.1, 1, 0, 7.0])  # 3 * 0.1 / 3 != 0.1 in floating point
    ids = torch.tensor([0, 0, 0, 1, 2, 2, 2, 3, 3, 4])
    dial = Dial(std_power=alpha, std_ddof=ddof, eps=0.0)
    a = advantages(r, ids, dial)
    assert torch.isfinite(a).all()
    assert (a[:7] == 0).all() and a[9] == 0  # all-equal groups and singletons: exactly zero
    assert (a[7:9] != 0).all()
    u = group_update(torch.ones(10, 3, dtype=F64), r, ids, dial)
    assert torch.isfinite(u).all()
    assert silent_groups(group_stats(r, ids, ddof)).tolist() == [True, True, True, False, True]


@pytest.mark.parametrize("agg", [sequence_mean, token_mean, constant_normalizer])
def test_aggregations_finite_with_empty_responses(agg):
    logp = torch.zeros(3, 4, dtype=F64, requires_grad=True)
    mask = torch.tensor([[0, 0, 0, 0], [1, 1, 0, 0], [0, 0, 0, 0]])
    loss = agg(clipped_surrogate(logp, logp.detach() + 0.1, _t([1.0, -1.0, 2.0]), Dial()), mask)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(logp.grad).all()
    assert (logp.grad[0] == 0).all() and (logp.grad[1, :2] != 0).all()
    empty = agg(torch.ones(2, 3, dtype=F64), torch.zeros(2, 3))
    assert empty.item() == 0.0


@pytest.mark.parametrize("agg", [sequence_mean, token_mean, constant_normalizer])
def test_padding_values_never_leak(agg):
    loss = _t([[1.0, 2.0, 5.0], [3.0, 4.0, 6.0]])
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]], dtype=torch.bool)
    poisoned = loss.masked_fill(~mask, float("nan"))
    assert agg(poisoned, mask).item() == agg(loss.masked_fill(~mask, 1e6), mask).item()


# ---------------------------------------------------------------- hand-computed aggregation

# lengths 1, 3, 2 (and one empty response) padded to T = 4; 99 is padding
HAND_LOSS = _t([[3, 99, 99, 99], [1, 2, 3, 99], [4, 8, 99, 99], [99, 99, 99, 99]])
HAND_MASK = torch.tensor([[1, 0, 0, 0], [1, 1, 1, 0], [1, 1, 0, 0], [0, 0, 0, 0]])


@pytest.mark.parametrize(
    ("dial", "expected"),
    [
        (Dial(length_norm="sequence"), (3 + 2 + 6 + 0) / 4),  # per-seq means 3, 2, 6, 0
        (Dial(length_norm="token"), 21 / 6),  # 3 + 6 + 12 over 6 tokens
        (Dial(length_norm="constant"), 21 / (4 * 4)),  # padded width T = 4
        (Dial(length_norm="constant", max_length=7), 21 / (4 * 7)),
    ],
)
def test_aggregation_hand_numbers(dial, expected):
    assert aggregate(HAND_LOSS, HAND_MASK, dial).item() == pytest.approx(expected, rel=1e-12)
    assert make_aggregator(dial)(HAND_LOSS, HAND_MASK).item() == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    ("length_norm", "expected"),
    # ratio 1 -> token loss -A: rows -1 | 2 2 2 | -0.5 -0.5 (adv 1, -2, 0.5; lengths 1, 3, 2)
    [("sequence", (-1 + 2 - 0.5) / 3), ("token", (-1 + 6 - 1) / 6), ("constant", 4 / (3 * 4))],
)
def test_policy_loss_hand_numbers(length_norm, expected):
    logp = torch.full((3, 4), -1.3, dtype=F64)
    mask = HAND_MASK[:3]
    loss = policy_loss(
        logp, logp.clone(), _t([1.0, -2.0, 0.5]), mask, Dial(length_norm=length_norm)
    )
    assert loss.item() == pytest.approx(expected, rel=1e-12)


# ---------------------------------------------------------------- TRL GRPOTrainer, re-derived


def _trl_advantages(rewards: torch.Tensor, g: int, scale_rewards: str) -> torch.Tensor:
    grouped = rewards.view(-1, g)
    adv = rewards - grouped.mean(dim=1).repeat_interleave(g)
    if scale_rewards == "group":
        adv = adv / (grouped.std(dim=1).repeat_interleave(g) + 1e-4)
    return adv


def _trl_loss(logp, old_logp, adv, mask, loss_type, eps_low, eps_high, max_completion_length):
    coef_1 = torch.exp(logp - old_logp)
    coef_2 = torch.clamp(coef_1, 1 - eps_low, 1 + eps_high)
    per_token_loss = -torch.min(coef_1 * adv.unsqueeze(1), coef_2 * adv.unsqueeze(1))
    mask = mask.to(per_token_loss.dtype)
    if loss_type == "grpo":
        return ((per_token_loss * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()
    if loss_type == "dr_grpo":
        return (per_token_loss * mask).sum() / (per_token_loss.size(0) * max_completion_length)
    return (per_token_loss * mask).sum() / mask.sum().clamp(min=1.0)  # dapo / bnpo


TRL_CASES = [  # (our preset + overrides, TRL scale_rewards, TRL loss_type, epsilon_high)
    ({"preset": "grpo", "std_ddof": 1, "eps": 1e-4}, "group", "grpo", 0.2),
    ({"preset": "dr_grpo", "max_length": 9}, "none", "dr_grpo", 0.2),
    ({"preset": "dapo", "std_ddof": 1, "eps": 1e-4}, "group", "dapo", 0.28),
    ({"preset": "dapo", "std_ddof": 1, "eps": 1e-4}, "group", "bnpo", 0.28),
]


@pytest.mark.parametrize(("cfg", "scale_rewards", "loss_type", "eps_high"), TRL_CASES)
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("reward_kind", ["binary", "real"])
def test_presets_match_trl(cfg, scale_rewards, loss_type, eps_high, seed, reward_kind):
    rng = np.random.default_rng(seed)
    m, g, t = 5, 4, 6
    if reward_kind == "binary":
        r = rng.integers(0, 2, size=(m, g)).astype(float)
        r[0], r[1] = 1.0, 0.0  # always include silent groups
    else:
        r = rng.normal(size=(m, g))
        r[0] = 0.7
    rewards = _t(r.reshape(-1))
    dial = dial_from_config(cfg)
    group_ids = torch.arange(m * g) // g  # TRL's layout: G consecutive completions per prompt
    adv = advantages(rewards, group_ids, dial)
    torch.testing.assert_close(adv, _trl_advantages(rewards, g, scale_rewards), rtol=1e-12, atol=0)

    lengths = rng.integers(0, t + 1, size=m * g)
    mask = torch.as_tensor(np.arange(t)[None, :] < lengths[:, None])
    logp = _t(rng.normal(-2.0, 0.5, size=(m * g, t)))
    old_logp = logp + _t(rng.normal(0.0, 0.3, size=(m * g, t)))  # ratios on both sides of the clip
    ours = policy_loss(logp, old_logp, adv, mask, dial)
    theirs = _trl_loss(logp, old_logp, adv, mask, loss_type, 0.2, eps_high, 9)
    torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=1e-15)
    if dial.silent == "drop":  # TRL's frac_reward_zero_std counts exactly the groups DAPO drops
        std_zero = torch.isclose(rewards.view(-1, g).std(dim=1), torch.zeros(m, dtype=F64))
        assert (~keep_mask(rewards, group_ids, dial)).tolist() == std_zero.repeat_interleave(
            g
        ).tolist()


# ---------------------------------------------------------------- clipped surrogate


@pytest.mark.parametrize(
    ("clip_low", "clip_high", "adv", "ratio", "binds"),
    [
        (0.2, 0.2, 1.0, 1.5, True),  # positive advantage, ratio above 1 + clip_high: clipped
        (0.2, 0.2, 1.0, 0.5, False),  # positive advantage, ratio low: min picks unclipped
        (0.2, 0.2, -1.0, 0.5, True),  # negative advantage, ratio below 1 - clip_low: clipped
        (0.2, 0.2, -1.0, 1.5, False),  # negative advantage, ratio high: never clipped
        (0.2, 0.2, 1.0, 1.0, False),
        (0.2, 0.2, 1.0, 1.25, True),  # symmetric 0.2 clips 1.25 ...
        (0.2, 0.28, 1.0, 1.25, False),  # ... DAPO's clip-higher 0.28 does not
        (0.2, 0.28, 1.0, 1.3, True),
        (0.1, 0.28, -1.0, 0.85, True),  # clip_low honoured separately
        (0.2, 0.28, -1.0, 0.85, False),
    ],
)
def test_clip_gradient(clip_low, clip_high, adv, ratio, binds):
    dial = Dial(clip_low=clip_low, clip_high=clip_high)
    logp = torch.tensor([[math.log(ratio)]], dtype=F64, requires_grad=True)
    loss = clipped_surrogate(logp, torch.zeros(1, 1, dtype=F64), _t([adv]), dial)
    loss.sum().backward()
    if binds:
        bound = 1 + clip_high if adv > 0 else 1 - clip_low
        assert loss.item() == pytest.approx(-bound * adv, rel=1e-12)
        assert logp.grad.item() == 0.0
    else:  # d(-rho A)/d logp = -rho A
        assert loss.item() == pytest.approx(-ratio * adv, rel=1e-12)
        assert logp.grad.item() == pytest.approx(-ratio * adv, rel=1e-12)


# ---------------------------------------------------------------- the dial and its config

NON_DEFAULT = {
    "std_power": 0.5,
    "std_ddof": 1,
    "eps": 1e-4,
    "silent": "drop",
    "max_resample_rounds": 7,
    "length_norm": "token",
    "max_length": 512,
    "clip_low": 0.1,
    "clip_high": 0.28,
    "lambda_value": 0.5,
    "lambda_learnable": True,
    "lambda_r": 0.1,
    "lambda_lr": 0.05,
    "strata": "length_bucket",
    "strata_blend": 0.3,
    "anchor": "prompt",
    "anchor_rate": 0.5,
    "anchor_update": "batch_std",
    "anchor_scale": 1.2,
    "anchor_window": 4,
    "singleton": "reward",
    "baseline": "leave_one_out",
    "std_scope": "batch",
    "gpg_scale": "informative",
    "whiten": "response",
    "ratio_level": "sequence",
    "bnpo_rows": 4,
    "empty_rows": "skip",
}
PRESET_VALUES = {  # written out, not read from PRESETS
    "grpo": {"std_power": 1.0, "silent": "keep", "length_norm": "sequence", "clip_high": 0.2},
    "dr_grpo": {"std_power": 0.0, "silent": "keep", "length_norm": "constant", "clip_high": 0.2},
    "dapo": {"std_power": 1.0, "silent": "drop", "length_norm": "token", "clip_high": 0.28},
    "lambda_grpo": {  # r = 1/9: arXiv 2510.06870
        "std_power": 1.0,
        "length_norm": "lambda",
        "lambda_learnable": True,
        "lambda_r": 1 / 9,
    },
    "stratified_grpo": {"std_power": 1.0, "strata": "truncated", "strata_blend": 0.5},
    "hadw_grpo": {  # Eqs. 8-11; lambda_scale 1.5: the paper's Table 7, the released code
        "std_power": 1.0,
        "length_norm": "sequence",
        "anchor": "batch",
        "anchor_update": "paper",
        "anchor_scale": 1.5,
    },
    "hadw_released": {  # github yangfengkai/HA-DW: the mean of the last 10 accuracies
        "std_power": 1.0,
        "anchor": "batch",
        "anchor_update": "released",
        "anchor_window": 10,
        "anchor_scale": 1.5,
    },
    # the engines' (core.estimators): the engine's form where it differs from the paper
    "rloo": {"baseline": "leave_one_out", "std_power": 0.0},  # verl 'rloo'
    "opo": {"baseline": "length_weighted", "std_power": 0.0},  # verl 'opo'
    "grpo_passk": {"baseline": "pass_at_k", "std_power": 1.0, "std_ddof": 1},  # verl
    "reinforce_pp": {"baseline": "none", "std_power": 0.0, "whiten": "token", "std_ddof": 1},
    "reinforce_pp_baseline": {"whiten": "token", "std_power": 0.0, "std_ddof": 1},
    "gdpo": {
        "std_ddof": 1,
        "eps": 1e-6,
        "singleton": "reward",
        "whiten": "token",
        "std_power": 1.0,
    },
    "batch_std": {"std_scope": "batch", "std_ddof": 1, "eps": 1e-4},  # TRL scale_rewards
    "gpg": {"gpg_scale": "nonzero_reward", "std_power": 0.0},  # verl's count, not the paper's
    "gspo": {"ratio_level": "sequence", "clip_low": 3e-4, "clip_high": 4e-4},  # GSPO v2 5.1
    "luspo": {"length_norm": "sequence_sum", "ratio_level": "sequence"},
    "bnpo": {"length_norm": "bnpo", "bnpo_rows": 8},  # TRL's per_device_train_batch_size
}
LEARNABLE_NEEDS_LAMBDA = "lambda_learnable needs length_norm='lambda'"
CROSS_FIELD = (  # every cross-field rule a dial has, each refused in one line
    LEARNABLE_NEEDS_LAMBDA,
    "baseline='none' needs std_power 0",
    "ratio_level='sequence' takes no learnable lambda",
)


def test_presets():
    assert sorted(PRESETS) == sorted(PRESET_VALUES)
    for name, values in PRESET_VALUES.items():
        for key, v in values.items():
            assert getattr(preset(name), key) == v
    with pytest.raises(TypeError):
        PRESETS["mine"] = Dial()  # the table is read-only
    with pytest.raises(AttributeError, match="frozen"):
        preset("grpo").std_power = 0.5


def test_every_field_overridable_and_documented():
    settings = dial_settings()
    assert set(NON_DEFAULT) == set(settings)
    for f in (SimpleNamespace(name=k, default=v.default, help=v.help) for k, v in settings.items()):
        assert len(f.help) > 40
        assert NON_DEFAULT[f.name] != f.default
        for name in [None, *PRESET_VALUES]:
            cfg = {f.name: NON_DEFAULT[f.name]} | ({} if name is None else {"preset": name})
            base = Dial() if name is None else preset(name)
            rule = _clash({**base.as_dict(), f.name: NON_DEFAULT[f.name]})
            if rule is not None:  # a cross-field rule refuses this override, in one line
                with pytest.raises(ValueError, match=re.escape(rule)):
                    dial_from_config(cfg)
                continue
            dial = dial_from_config(cfg)
            assert getattr(dial, f.name) == NON_DEFAULT[f.name]
            others = [g for g in settings if g != f.name]
            assert all(getattr(dial, o) == getattr(base, o) for o in others)


def _clash(v: dict) -> str | None:
    """The first cross-field rule (CROSS_FIELD) these field values break, in the order the
    registry checks them (registration order), written out here."""
    if v["baseline"] == "none" and v["std_power"] != 0:
        return CROSS_FIELD[1]
    if v["ratio_level"] == "sequence" and v["lambda_learnable"]:
        return CROSS_FIELD[2]
    if v["lambda_learnable"] and v["length_norm"] != "lambda":
        return CROSS_FIELD[0]
    return None


@FAST
@given(
    name=st.sampled_from([None, "grpo", "dr_grpo", "dapo"]),
    overrides=st.fixed_dictionaries(
        {},
        optional={
            "std_power": st.floats(0, 1),
            "std_ddof": st.sampled_from([0, 1]),
            "eps": st.floats(0, 1e-2),
            "silent": st.sampled_from(["keep", "drop"]),
            "max_resample_rounds": st.integers(0, 20),
            "length_norm": st.sampled_from(["sequence", "token", "constant"]),
            "max_length": st.none() | st.integers(1, 10_000),
            "clip_low": st.floats(0, 0.99),
            "clip_high": st.floats(0, 10),
        },
    ),
)
def test_any_combination_reachable(name, overrides):
    dial = dial_from_config(overrides if name is None else {"preset": name, **overrides})
    defaults = {k: v.default for k, v in dial_settings().items()}
    expected = defaults | ({} if name is None else PRESET_VALUES[name]) | overrides
    assert dial.as_dict() == expected


@pytest.mark.parametrize(
    ("cfg", "must_mention"),
    [
        ({"std_pwr": 0.5}, ["std_pwr", "std_power", "length_norm", "preset"]),
        ({"preset": "ppo"}, ["ppo", "grpo", "dr_grpo", "dapo"]),
        ({"silent": "maybe"}, ["silent", "'keep'", "'drop'"]),
        ({"length_norm": "tokens"}, ["length_norm", "'sequence'", "'token'", "'constant'"]),
        ({"std_power": 1.5}, ["std_power", "1.5"]),
        ({"std_power": -0.1}, ["std_power"]),
        ({"std_power": "1"}, ["std_power", "number"]),
        ({"std_ddof": 2}, ["std_ddof", "0, 1"]),
        ({"std_ddof": 1.0}, ["std_ddof", "0, 1"]),  # a float ddof would silently be accepted
        ({"silent": True}, ["silent"]),
        ({"eps": -1e-6}, ["eps"]),
        ({"eps": float("inf")}, ["eps"]),
        ({"eps": "1e-4"}, ["eps", "number"]),
        ({"max_resample_rounds": -1}, ["max_resample_rounds"]),
        ({"max_length": 0}, ["max_length"]),
        ({"clip_low": 1.0}, ["clip_low"]),
        ({"clip_high": -0.1}, ["clip_high"]),
        ({"length_norm": "lambda", "lambda_r": 0.0}, ["lambda_r", "> 0"]),
        ({"length_norm": "lambda", "lambda_r": -0.5}, ["lambda_r"]),
        ({"lambda_learnable": True}, ["lambda_learnable", "lambda"]),
        ({"lambda_value": float("nan")}, ["lambda_value"]),
        ({"anchor": "batch", "anchor_rate": 0.0}, ["anchor_rate", "(0, 1]"]),
        ({"anchor": "batch", "anchor_rate": 1.5}, ["anchor_rate", "(0, 1]"]),
        ({"anchor": "history"}, ["anchor", "'batch'", "'prompt'"]),
        ({"anchor_scale": 0}, ["anchor_scale"]),
        ({"anchor_window": 1}, ["anchor_window"]),
        ({"strata": ""}, ["strata"]),
        ({"strata_blend": 1.2}, ["strata_blend"]),
    ],
)
def test_config_errors_name_the_problem(cfg, must_mention):
    with pytest.raises(ValueError) as err:
        dial_from_config(cfg)
    msg = str(err.value)
    assert "\n" not in msg
    for word in must_mention:
        assert word in msg


def test_bad_tensor_inputs_raise_value_error():
    r, ids = _t([1.0, 0.0]), torch.tensor([0, 0])
    with pytest.raises(ValueError, match="group_ids"):
        advantages(r, ids.double(), Dial())
    with pytest.raises(ValueError, match="equal length"):
        advantages(r, torch.tensor([0, 0, 1]), Dial())
    with pytest.raises(ValueError, match="NaN"):
        advantages(_t([1.0, float("nan")]), ids, Dial())
    with pytest.raises(ValueError, match="scores"):
        group_update(torch.ones(3, 2), r, ids, Dial())
    with pytest.raises(ValueError, match="mask"):
        token_mean(torch.ones(2, 3), torch.ones(2, 4))
    with pytest.raises(ValueError, match="adv"):
        clipped_surrogate(torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(3), Dial())
    with pytest.raises(ValueError, match="dr_grpo"):
        preset("drgrpo")


def test_group_update_large_scores_take_the_sparse_product(monkeypatch):
    """Above SMALL_SCORES elements the update is one sparse product (no (N, D) temporary):
    the same numbers as the index_add path."""
    from grpo_dial.core import advantage as adv_module

    rng = np.random.default_rng(3)
    r = _t(rng.integers(0, 2, 24))
    ids = torch.as_tensor(np.arange(24) // 6)
    scores = _t(rng.normal(size=(24, 5)))
    small = group_update(scores, r, ids, Dial())
    monkeypatch.setattr(adv_module, "SMALL_SCORES", 0)
    torch.testing.assert_close(group_update(scores, r, ids, Dial()), small, rtol=1e-12, atol=1e-14)
