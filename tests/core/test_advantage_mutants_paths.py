"""core.advantage: the paths a full mutation run found untested: Stratified GRPO over OPO's
length-weighted baseline (the cells get the lengths too), the update's dtype, lambda-GRPO's
groups in policy_loss, GSPO's mask in weighted_policy_loss, the refusal lines, and keep_mask's
device (the meta device stands in for a GPU)."""

from __future__ import annotations

import pytest
import torch

from grpo_dial.core.advantage import (
    advantages,
    clipped_surrogate,
    constant_normalizer,
    group_stats,
    group_update,
    keep_mask,
    make_token_weights,
    policy_loss,
    weighted_policy_loss,
)
from grpo_dial.core.dial import Dial
from grpo_dial.core.estimators import ESTIMATORS, register_estimator, unregister_estimator
from grpo_dial.core.settings import Setting
from grpo_dial.core.token_weights import lambda_weights, weighted_sum

F64 = torch.float64


def test_stratified_opo_gives_each_cell_its_lengths():
    # one group, r = 1, 0, 1, 0, |o| = 1, 2, 3, 4, std_power 0: OPO's b = (1 + 3) / 10 = 0.4;
    # strata 0, 0, 1, 1: cell b = 1/3 and 3/7; blend 1/2 of cell and group advantages
    dial = Dial(baseline="length_weighted", std_power=0.0, strata="truncated", strata_blend=0.5)
    r = torch.tensor([1.0, 0.0, 1.0, 0.0], dtype=F64)
    got = advantages(
        r,
        torch.zeros(4, dtype=torch.long),
        dial,
        lengths=torch.tensor([1.0, 2.0, 3.0, 4.0]),
        strata=torch.tensor([0, 0, 1, 1]),
    )
    cell = [2 / 3, -1 / 3, 4 / 7, -3 / 7]
    group = [0.6, -0.4, 0.6, -0.4]
    want = [0.5 * c + 0.5 * g for c, g in zip(cell, group, strict=True)]
    assert got.tolist() == pytest.approx(want, rel=1e-12, abs=0)


@pytest.fixture
def toy_scale():
    yield "toy_scale"
    if "toy_scale" in ESTIMATORS:
        unregister_estimator("toy_scale")


def test_a_scale_owner_gets_the_context_it_needs(toy_scale):
    # a toy scale slot s_i = |o_i|: A = (r - mean_g) / |o_i|
    register_estimator(
        toy_scale, kind="scale", needs=("lengths",), active=lambda dial: dial.toy_scale_on,
        fields={"toy_scale_on": Setting(False, "a toy switch.", kind=bool)},
    )(lambda stats, dial, lengths=None: lengths)  # fmt: skip
    got = advantages(
        torch.tensor([1.0, 0.0, 0.0, 0.0]),
        torch.zeros(4, dtype=torch.long),
        Dial(toy_scale_on=True),
        lengths=torch.tensor([3.0, 2.0, 4.0, 1.0]),
    )
    assert got.tolist() == [0.25, -0.125, -0.0625, -0.25]


def test_refusal_lines_word_for_word():
    r, g = torch.tensor([1.0, 0.0]), torch.tensor([0, 0])
    with pytest.raises(ValueError) as err:
        advantages(r, g, Dial(), bogus=1)
    assert str(err.value) == "unknown advantage context 'bogus'; valid: anchor, lengths, strata"
    with pytest.raises(ValueError) as err:
        group_stats(r, g, 2)
    assert str(err.value) == "ddof=2 is not valid; choose one of 0, 1"
    with pytest.raises(ValueError) as err:
        group_stats(torch.tensor([1.0, float("nan")]), g)
    assert str(err.value) == "rewards contain NaN or inf"


@pytest.mark.parametrize(
    "logp, old, adv",
    [
        (torch.zeros(2, 3, 1), torch.zeros(2, 3, 1), torch.zeros(2)),  # 3-D, shapes agree
        (torch.zeros(2, 3), torch.zeros(2, 4), torch.zeros(2)),  # old_logp's shape differs
    ],
)
def test_clipped_surrogate_refuses_each_shape_fault(logp, old, adv):
    with pytest.raises(ValueError, match=r"^need logp, old_logp \(B, T\) and adv \(B,\), got "):
        clipped_surrogate(logp, old, adv, Dial())


def test_group_update_takes_the_scores_dtype():
    # r = 1, 0 in one group, eps 0: A = +-1, w = A / 2; float64 rewards, float32 scores
    scores = torch.tensor([[2.0, 4.0], [1.0, 1.0]], dtype=torch.float32)
    got = group_update(scores, torch.tensor([1.0, 0.0], dtype=F64), torch.tensor([0, 0]),
                       Dial(eps=0.0))  # fmt: skip
    assert got.dtype == torch.float32 and got.tolist() == [[0.5, 1.5]]


def test_policy_loss_weighs_lambda_grpo_within_each_group():
    # two groups of two, lengths 1/3 and 2/2: lambda 1.5 lifts the longer response of group 0
    dial = Dial(length_norm="lambda", lambda_value=1.5, lambda_r=0.5)
    mask = torch.tensor([[1.0, 0.0, 0.0], [1.0, 1.0, 1.0], [1.0, 1.0, 0.0], [1.0, 1.0, 0.0]])
    ids = torch.tensor([0, 0, 1, 1])
    logp = torch.tensor([[0.1, 0.0, 0.0], [-0.2, 0.05, 0.1], [0.0, 0.1, 0.0], [0.2, -0.1, 0.0]])
    old = torch.zeros(4, 3)
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5])
    surrogate = clipped_surrogate(logp, old, adv, dial)
    want = weighted_sum(surrogate, lambda_weights(mask, ids, 1.5, 0.5))
    one_group = weighted_sum(surrogate, lambda_weights(mask, None, 1.5, 0.5))
    got = policy_loss(logp, old, adv, mask, dial, ids)
    assert got.item() == pytest.approx(want.item(), rel=1e-6)
    assert abs(want.item() - one_group.item()) > 1e-3  # the groups matter here


def test_weighted_policy_loss_gives_gspo_the_response_mask():
    # GSPO's ratio is per response over its real tokens: padding log-ratios must not count
    dial = Dial(ratio_level="sequence", clip_low=0.2, clip_high=0.2)
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    logp = torch.tensor([[0.1, -0.05, 3.0], [0.02, -2.0, 5.0]])  # padding holds large values
    old = torch.zeros(2, 3)
    adv = torch.tensor([1.0, -1.0])
    weights = make_token_weights(dial)(mask)
    got = weighted_policy_loss(logp, old, adv, weights, dial)
    # sequence ratios s = exp(mean of real log-ratios): e^0.025, e^0.02; sequence weights 1/4, 1/2
    s0, s1 = torch.tensor(0.025).exp().item(), torch.tensor(0.02).exp().item()
    want = 2 * 0.25 * -(s0 * 1.0) + 0.5 * -(s1 * -1.0)
    assert got.item() == pytest.approx(want, rel=1e-6)
    assert got.item() == pytest.approx(policy_loss(logp, old, adv, mask, dial).item(), rel=1e-6)


def test_keep_mask_lives_on_the_rewards_device():
    rewards = torch.ones(3, device="meta")
    got = keep_mask(rewards, torch.zeros(3, dtype=torch.long, device="meta"), Dial())
    assert got.device.type == "meta" and got.dtype == torch.bool and got.shape == (3,)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_group_stats_and_the_update_on_the_device():
    r = torch.tensor([1.0, 0.0, 1.0], device="cuda")
    stats = group_stats(r, torch.tensor([0, 0, 1], device="cuda"))
    assert stats.size.device == r.device and stats.size.tolist() == [2, 1]
    # rewards on the CPU, scores on the device: the small (index_add) and the sparse product
    for width in (2, 2**21):
        scores = torch.ones(3, width, device="cuda")
        got = group_update(scores, r.cpu(), torch.tensor([0, 0, 1]), Dial(eps=0.0))
        assert got.device == scores.device and got[:, 0].tolist() == [0.0, 0.0]


def test_a_group_of_equal_negative_rewards_is_silent():
    # -0.1 three times: k / G = -0.10000000000000002, so only the comparison lo == hi (both
    # over the group's own rewards, not 0) makes the group silent with A exactly 0
    r = torch.tensor([-0.1, -0.1, -0.1], dtype=F64)
    g = torch.zeros(3, dtype=torch.long)
    stats = group_stats(r, g)
    assert stats.mean.tolist() == [-0.1] and stats.sigma.tolist() == [0.0]
    assert advantages(r, g, Dial()).tolist() == [0.0, 0.0, 0.0]


def test_the_surrogate_takes_the_ratios_dtype():
    # float32 log-probs, float64 advantages: the loss is float32, -rho A = -1 x 2 per token
    logp = torch.zeros(1, 2, dtype=torch.float32)
    got = clipped_surrogate(logp, logp, torch.tensor([2.0], dtype=F64), Dial())
    assert got.dtype == torch.float32 and got.tolist() == [[-2.0, -2.0]]


def test_constant_normalizer_divides_by_the_given_max_length():
    # B 2, L_max 8 (not the width 3): (1 + 2 + 4) / (2 x 8)
    loss = torch.tensor([[1.0, 2.0, 9.0], [4.0, 9.0, 9.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    assert constant_normalizer(loss, mask, 8).item() == 7 / 16


def test_group_stats_defaults_to_the_population_std_and_refuses_bool_ids():
    r = torch.tensor([1.0, 0.0])
    assert group_stats(r, torch.tensor([0, 0])).sigma.tolist() == [0.5]
    with pytest.raises(ValueError) as err:
        group_stats(r, torch.tensor([True, True]))
    assert str(err.value) == "group_ids must be an integer tensor, got torch.bool"
