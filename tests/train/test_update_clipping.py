"""The two clippings of `policy_update` against loop references: PPO's asymmetric ratio clip
(DAPO's clip-higher: the upper bound 1 + clip_high differs from the lower 1 - clip_low), written
per token from its case split, and the gradient-norm clip, written from its definition."""

from __future__ import annotations

import copy
import math
from dataclasses import replace

import pytest
import torch
from _rl_fixtures import FakeTask, one_thread, tiny_policy  # noqa: F401

from grpo_dial.core import advantage
from grpo_dial.core.dial import preset
from grpo_dial.policy.rollout import response_logprobs
from grpo_dial.train.config import TrainConfig
from grpo_dial.train.step import make_optimizer, policy_update, sample_batch, sampling_rngs

CFG = TrainConfig(
    steps=4, prompts_per_step=6, group_size=4, max_new_tokens=8, train_pool=20,
    heldout_prompts=10, eval_every=2, checkpoint_every=2, identity_every=2, identity_groups=2,
    progress=False, optimizer="sgd", grad_clip=None,
)  # fmt: skip


def _train_batch(dial, config):
    model, tokenizer = tiny_policy(seed=2)
    task = FakeTask()
    pool = task.problems("train", config.train_pool, config.pool_seed)
    rng, gen = sampling_rngs(config)
    batch = sample_batch(model, tokenizer, task, pool, dial, config, rng, gen)
    adv = advantage.advantages(batch.rewards, batch.group_ids, dial)[batch.trained]  # (B,)
    return model, batch.rollouts.select(batch.trained), adv


def _loop_loss(logp, old, adv, mask, clip_low, clip_high):
    """GRPO's per-response token mean of the PPO loss, token by token: for A > 0 the ratio is
    capped at 1 + clip_high (-A min(rho, 1 + clip_high)), for A < 0 floored at 1 - clip_low
    (-A max(rho, 1 - clip_low)); (1/B) sum_i (1/|o_i|) sum_t."""
    total = logp.new_zeros(())
    for i in range(logp.shape[0]):
        a, row, n = float(adv[i]), logp.new_zeros(()), int(mask[i].sum())
        for t in range(logp.shape[1]):
            if not mask[i, t]:
                continue
            rho = torch.exp(logp[i, t] - old[i, t])
            if a > 0:
                row = row - a * torch.clamp(rho, max=1 + clip_high)
            elif a < 0:
                row = row - a * torch.clamp(rho, min=1 - clip_low)
        total = total + row / max(n, 1)
    return total / logp.shape[0]


def test_asymmetric_clip_update_matches_a_token_loop():
    """clip_low 0.05, clip_high 0.3 (clip-higher), five SGD steps on one batch: the trainer's
    parameters equal the loop's, and some positive-advantage tokens sit between 1 + clip_low
    and 1 + clip_high on a later step, where only the upper bound 1 + clip_high keeps their
    gradient (a trainer that clipped both sides at clip_low would zero it)."""
    dial = preset("grpo").replace(clip_low=0.05, clip_high=0.3)
    # lr 0.5 and 5 updates: 7 positive-advantage tokens pass through the band on this batch
    # (lr 2.0 and 3 updates left none once the sampler stopped drawing pad/bos/unk)
    cfg = replace(CFG, lr=0.5, updates_per_batch=5)
    model, train, adv = _train_batch(dial, cfg)
    mask = train.response_mask
    ref = copy.deepcopy(model)
    old, between = None, 0
    for _ in range(cfg.updates_per_batch):
        ref.zero_grad()
        logp = response_logprobs(ref, train)  # (B, T)
        old = logp.detach() if old is None else old
        rho = torch.exp(logp.detach() - old)
        between += int(((rho > 1 + dial.clip_low) & (rho < 1 + dial.clip_high) & mask.bool()
                        & (adv > 0)[:, None]).sum())  # fmt: skip
        _loop_loss(logp, old, adv, mask, dial.clip_low, dial.clip_high).backward()
        with torch.no_grad():
            for p in ref.parameters():
                p -= cfg.lr * p.grad
    assert between > 0, "no token in the asymmetric band: the case cannot fail"
    result = policy_update(model, make_optimizer(model, cfg), train, adv, dial, cfg)
    assert result.finite
    for p, q in zip(model.parameters(), ref.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)


def test_grad_clip_scales_the_step_to_the_clip_norm():
    """grad_clip 0.05 well below the gradient's norm: one SGD step moves by lr * g * 0.05 /
    (||g|| + 1e-6) (torch's clip_grad_norm_), ||g|| the norm of all the policy's gradients;
    the reported grad_norm is the norm before clipping. A loose clip leaves the step alone."""
    dial = preset("grpo")
    model, train, adv = _train_batch(dial, CFG)
    ref = copy.deepcopy(model)
    ref.zero_grad()
    logp = response_logprobs(ref, train)
    advantage.policy_loss(logp, logp.detach(), adv, train.response_mask, dial).backward()
    norm = math.sqrt(sum(float(p.grad.double().pow(2).sum()) for p in ref.parameters()))
    assert norm > 0.5, "the clip must bind for the case to fail"
    for clip, lr in ((0.05, 0.5), (1e6, 0.5)):
        cfg = replace(CFG, lr=lr, grad_clip=clip)
        coef = min(1.0, clip / (norm + 1e-6))
        want = [p.detach() - lr * coef * p.grad for p in ref.parameters()]
        m = copy.deepcopy(model)
        result = policy_update(m, make_optimizer(m, cfg), train, adv, dial, cfg)
        assert result.grad_norm == pytest.approx(norm, rel=1e-5)
        for p, q in zip(m.parameters(), want, strict=True):
            torch.testing.assert_close(p.detach(), q, rtol=1e-5, atol=1e-7)
        pairs = zip(m.parameters(), model.parameters(), strict=True)
        moved = math.sqrt(sum(float((p - q).detach().double().pow(2).sum()) for p, q in pairs))
        assert moved == pytest.approx(lr * min(norm, clip), rel=1e-4)
