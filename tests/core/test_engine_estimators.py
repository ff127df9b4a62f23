"""The engines' estimators as settings of the dial (core.estimators): hand numbers for each,
the cross-field refusals, and the exact identities between them (the same operation up to a
per-batch or per-group constant). Their equality with verl's and TRL's own code is in
tests/engines."""

from __future__ import annotations

import math

import pytest
import torch

from grpo_dial.core.advantage import (
    advantages,
    make_token_weights,
    policy_loss,
)
from grpo_dial.core.dial import Dial, dial_from_config
from grpo_dial.core.token_weights import aggregation_weights, bnpo_weights

F64 = torch.float64


def _t(x, dtype=F64):
    return torch.tensor(x, dtype=dtype)


def _adv(rewards, ids, spec, **context):
    return advantages(_t(rewards), torch.tensor(ids), dial_from_config(spec), **context).tolist()


# ------------------------------------------------------------------------- hand numbers


def test_leave_one_out_hand_numbers():
    # one right of four: r - mean of the other three = 1, 0 - 1/3
    got = _adv([1, 0, 0, 0, 1], [0, 0, 0, 0, 9], {"preset": "rloo"})
    assert got == pytest.approx([1, -1 / 3, -1 / 3, -1 / 3, 0])  # a lone response: 0
    lone = _adv([1, 0, 0, 0, 1], [0, 0, 0, 0, 9], {"preset": "rloo", "singleton": "reward"})
    assert lone[-1] == 1.0  # verl's rloo keeps a lone response's reward


def test_length_weighted_baseline_hand_numbers():
    # b = (3 x 1 + 1 x 0) / 4 = 0.75; the second group has no token: its mean, 0.5
    got = _adv([1, 0, 1, 0], [0, 0, 1, 1], {"preset": "opo"}, lengths=torch.tensor([3, 1, 0, 0]))
    assert got == pytest.approx([0.25, -0.75, 0.5, -0.5])
    with pytest.raises(ValueError, match="baseline='length_weighted' needs the response lengths"):
        _adv([1, 0], [0, 0], {"preset": "opo"})


def test_pass_at_k_hand_numbers():
    # the unique best moves by r_max - r_second (0.5), divided by the sample std 0.5 + eps
    got = _adv([1, 0, 0.5], [0, 0, 0], {"preset": "grpo_passk", "eps": 0.0})
    assert got == pytest.approx([1.0, 0.0, 0.0])
    assert _adv([1, 0, 1], [0, 0, 0], {"preset": "grpo_passk"}) == [0.0, 0.0, 0.0]  # a tie


def test_batch_std_hand_numbers():
    # rewards 1 0 | 1 1: population std of the batch sqrt(3/16) = 0.433, of the first group 0.5
    got = _adv([1, 0, 1, 1], [0, 0, 1, 1], {"std_scope": "batch", "eps": 0.0})
    assert got == pytest.approx([0.5 / math.sqrt(3 / 16), -0.5 / math.sqrt(3 / 16), 0, 0])
    assert _adv([1, 0, 1, 1], [0, 0, 1, 1], {"eps": 0.0}) == pytest.approx([1, -1, 0, 0])


def test_gpg_hand_numbers():
    # Dr. GRPO's A = .75, -.25 x 3 | 0, 0; B = 6: verl's M = 1 nonzero reward, the paper's 4
    r, ids = [1, 0, 0, 0, 0, 0], [0, 0, 0, 0, 1, 1]
    verl = _adv(r, ids, {"preset": "gpg"})
    paper = _adv(r, ids, {"preset": "gpg", "gpg_scale": "informative"})
    assert verl == pytest.approx([4.5, -1.5, -1.5, -1.5, 0, 0])
    assert paper == pytest.approx([1.125, -0.375, -0.375, -0.375, 0, 0])


def test_whitening_hand_numbers():
    # Dr. GRPO's A = .5 -.5 | 0 0; over responses mu 0, var (ddof 1) 0.5 / 3
    r, ids, lengths = [1, 0, 1, 1], [0, 0, 1, 1], torch.tensor([1, 3, 2, 2])
    resp = _adv(r, ids, {"preset": "reinforce_pp_baseline", "whiten": "response"})
    assert resp == pytest.approx([x / math.sqrt(1 / 6 + 1e-8) for x in (0.5, -0.5, 0, 0)])
    # over tokens: mu = (.5 - 1.5) / 8 = -.125, var = .875 / 7 = .125: silent groups move too
    tok = _adv(r, ids, {"preset": "reinforce_pp_baseline"}, lengths=lengths)
    assert tok == pytest.approx(
        [x / math.sqrt(0.125 + 1e-8) for x in (0.625, -0.375, 0.125, 0.125)]
    )


def test_no_baseline_and_the_lone_response():
    assert _adv([1, 0, 1], [0, 0, 1], {"baseline": "none", "std_power": 0.0}) == [1, 0, 1]
    with pytest.raises(ValueError, match="baseline='none' needs std_power 0"):
        Dial(baseline="none")
    lone = _adv([2.0, 1, 0], [0, 1, 1], {"singleton": "reward", "eps": 1e-6})
    assert lone[0] == pytest.approx(2 / (1 + 1e-6), rel=1e-15)  # verl: mean 0, std 1
    assert _adv([2.0, 1, 0], [0, 1, 1], {})[0] == 0.0


def test_sequence_ratio_hand_numbers():
    # one response, log-ratios .1 and .3 (padding NaN): s = e^.2 = 1.2214 > 1 + 0.2 for A > 0
    old = _t([[0.0, 0.0, 0.0]])
    mask = _t([[1.0, 1.0, 0.0]])
    dial = Dial(ratio_level="sequence")
    logp = _t([[0.1, 0.3, float("nan")]]).requires_grad_(True)
    loss = policy_loss(logp, old, _t([1.0]), mask, dial)
    loss.backward()
    assert float(loss.detach()) == pytest.approx(-1.2) and logp.grad[0, :2].tolist() == [0.0, 0.0]
    logp = _t([[0.1, 0.3, float("nan")]]).requires_grad_(True)
    loss = policy_loss(logp, old, _t([-1.0]), mask, dial)  # A < 0: unclipped, -s A
    loss.backward()
    s = math.exp(0.2)
    assert float(loss.detach()) == pytest.approx(s)
    assert logp.grad[0, :2].tolist() == pytest.approx([s / 2, s / 2])  # d s / d logp_t = s / |o|
    assert logp.grad[0, 2] == 0.0
    with pytest.raises(ValueError, match="ratio_level='sequence' takes no learnable lambda"):
        Dial(ratio_level="sequence", length_norm="lambda", lambda_learnable=True)


def test_aggregation_weights_hand_numbers():
    mask = _t([[1, 1, 0, 0], [0, 0, 0, 0], [1, 1, 1, 0]])  # lengths 2, 0, 3
    row0 = {  # weight of one token of row 0 under each aggregation
        "sequence_sum": 1 / 3, "sum": 1.0, "token": 1 / 5, "sequence": 1 / 6, "constant": 1 / 12,
    }  # fmt: skip
    for norm, w in row0.items():
        assert float(aggregation_weights(mask, norm)[0, 0]) == pytest.approx(w)
    skip = {"sequence_sum": 1 / 2, "sequence": 1 / 4, "constant": 1 / 8}  # B = 2 rows with tokens
    for norm, w in skip.items():
        assert float(aggregation_weights(mask, norm, count_empty=False)[0, 0]) == pytest.approx(w)
    # bnpo, rows 2: micro-batch {0, 1} has 2 tokens, {2} has 3; C = 2 micro-batches
    w = bnpo_weights(mask, 2)
    assert float(w[0, 0]) == 1 / 4 and float(w[2, 0]) == pytest.approx(1 / 6)
    assert torch.equal(bnpo_weights(mask, 3), aggregation_weights(mask, "token"))
    dial = Dial(length_norm="bnpo", bnpo_rows=2)
    assert torch.equal(make_token_weights(dial)(mask), w)
    with pytest.raises(ValueError, match="unknown aggregation 'mean'"):
        aggregation_weights(mask, "mean")


# ------------------------------------------------------------ identities (closed forms)


def _random(seed: int, sizes=(2, 3, 5, 8, 16)):
    g = torch.Generator().manual_seed(seed)
    ids = torch.cat([torch.full((s,), j) for j, s in enumerate(sizes)])
    r = (torch.rand(len(ids), generator=g) < torch.rand(len(ids), generator=g)).double()
    r[:2] = torch.tensor([1.0, 0.0])  # one informative group at least
    lengths = torch.randint(0, 12, ids.shape, generator=g)
    return r, ids, lengths


@pytest.mark.parametrize("seed", range(10))
def test_rloo_is_dr_grpo_times_g_over_g_minus_1(seed):
    r, ids, _ = _random(seed)
    rloo = advantages(r, ids, dial_from_config({"preset": "rloo"}))
    dr = advantages(r, ids, dial_from_config({"preset": "dr_grpo"}))
    g = torch.bincount(ids)[ids].double()
    torch.testing.assert_close(rloo, g / (g - 1) * dr, atol=1e-15, rtol=0)


@pytest.mark.parametrize("seed", range(10))
def test_batch_std_is_dr_grpo_times_one_constant(seed):
    r, ids, _ = _random(seed)
    batch = advantages(r, ids, dial_from_config({"preset": "batch_std"}))
    dr = advantages(r, ids, dial_from_config({"preset": "dr_grpo"}))
    c = 1 / (r.std() + 1e-4)  # one number for every group: difficulty weighted as Dr. GRPO
    torch.testing.assert_close(batch, c * dr, atol=1e-12, rtol=0)
    gpg = advantages(r, ids, dial_from_config({"preset": "gpg"}))
    torch.testing.assert_close(gpg, len(r) / (r != 0).sum().double() * dr, atol=1e-12, rtol=0)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("norm", ["sequence", "token", "constant", "sequence_sum", "sum", "bnpo"])
def test_sequence_ratio_has_the_token_ratios_gradient_on_the_first_update(seed, norm):
    """At ratio 1 (the first update of a batch) GSPO's gradient is the token ratio's under
    every aggregation: d s_i = (1/|o_i|) sum_t d logp_it and each row's weights sum to the
    same. Off policy they differ (the hand numbers above)."""
    r, ids, lengths = _random(seed)
    mask = (torch.arange(12)[None, :] < lengths[:, None]).double()
    old = -torch.rand(mask.shape, generator=torch.Generator().manual_seed(seed), dtype=F64)
    adv = advantages(r, ids, Dial())
    grads = []
    for level in ("token", "sequence"):
        logp = old.clone().requires_grad_(True)
        dial = Dial(length_norm=norm, ratio_level=level, bnpo_rows=5)
        policy_loss(logp, old, adv, mask, dial).backward()
        grads.append(logp.grad)
    seq_mass = (grads[1] * mask).sum(-1)  # GSPO spreads each row's gradient evenly ...
    torch.testing.assert_close(seq_mass, (grads[0] * mask).sum(-1), atol=1e-14, rtol=0)
    even = grads[1] * mask - seq_mass[:, None] * mask / lengths.clamp(min=1)[:, None]
    assert float(even.abs().max()) < 1e-14  # ... over its tokens


def test_token_sum_luspo_and_token_mean_differ_by_one_batch_constant():
    r, ids, lengths = _random(0)
    mask = (torch.arange(12)[None, :] < lengths[:, None]).double()
    w = {n: aggregation_weights(mask, n) for n in ("sum", "sequence_sum", "token")}
    torch.testing.assert_close(w["sequence_sum"], w["sum"] / len(r))
    torch.testing.assert_close(w["token"], w["sum"] / mask.sum())
