"""One RL step's parts on a tiny Llama and a fake task: the update against a hand-computed SGD
step, PPO's old log-probs, reuse of the sampler's projections, DAPO refill and learning-rate
matching."""

from __future__ import annotations

import copy
import math
import weakref
from dataclasses import replace

import numpy as np
import pytest
import torch
from _rl_fixtures import FakeTask, one_thread, tiny_policy  # noqa: F401

from grpo_dial.core import advantage
from grpo_dial.core.advantage import group_stats
from grpo_dial.core.dial import preset
from grpo_dial.policy.rollout import response_logprobs
from grpo_dial.train import records as rec
from grpo_dial.train.batch import UpdateResult
from grpo_dial.train.config import TrainConfig
from grpo_dial.train.step import (
    calibration_update_norm,
    lr_match_factor,
    make_optimizer,
    policy_update,
    sample_batch,
    sampling_rngs,
    update_norm,
)

CFG = TrainConfig(
    steps=4, prompts_per_step=3, group_size=4, max_new_tokens=8, train_pool=20,
    heldout_prompts=10, eval_every=2, checkpoint_every=2, identity_every=2, identity_groups=2,
    progress=False,
)  # fmt: skip


class NeverRight(FakeTask):
    def verify(self, problem, response, finished):
        return super().verify(problem, "z", finished)


def _batch(model, tokenizer, dial, config, task=None):
    task = task or FakeTask()
    pool = task.problems("train", config.train_pool, config.pool_seed)
    rng, gen = sampling_rngs(config)
    return sample_batch(model, tokenizer, task, pool, dial, config, rng, gen)


def _k(batch):
    stats = group_stats(batch.rewards, batch.group_ids)
    return stats.k, stats.size  # (M,), (M,)


# --------------------------------------------------------------------------- the update


def test_one_sgd_step_is_minus_lr_grad_and_moves_logprobs_by_advantage_sign():
    dial = preset("grpo")
    cfg = replace(CFG, optimizer="sgd", lr=0.02, grad_clip=None, prompts_per_step=4)
    model, tokenizer = tiny_policy(seed=2)
    batch = _batch(model, tokenizer, dial, cfg)
    adv = advantage.advantages(batch.rewards, batch.group_ids, dial)[batch.trained]  # (B,)
    train = batch.rollouts.select(batch.trained)
    assert (adv > 0).any() and (adv < 0).any()

    # Expected step by hand: GRPO's loss -(1/B) sum_i A_i mean_t log pi(o_it), SGD.
    ref = copy.deepcopy(model)
    logp = response_logprobs(ref, train)  # (B, T)
    lens = train.response_mask.sum(1)  # (B,)
    loss = -(adv * logp.sum(1) / lens).mean()
    loss.backward()
    expected = {n: p.detach() - 0.02 * p.grad for n, p in ref.named_parameters()}

    before = response_logprobs(model, train).sum(1).detach()  # (B,)
    opt = make_optimizer(model, cfg)
    result = policy_update(model, opt, train, adv, dial, cfg)
    # At ratio 1 the surrogate's value is -(1/B) sum_i A_i; its gradient is the one above.
    assert result.finite and result.loss == pytest.approx(-float(adv.mean()), abs=1e-6)
    for name, p in model.named_parameters():
        torch.testing.assert_close(p.detach(), expected[name], rtol=1e-5, atol=1e-7)
    delta = response_logprobs(model, train).sum(1).detach() - before  # (B,)
    # Shared parameters couple the responses, so single ones may move against their sign; on
    # average the positive ones go up and the negative ones down, and to first order
    # sum_i (A_i / |o_i|) delta_i / B = lr ||g||^2 exactly.
    assert delta[adv > 0].mean() > 0 and delta[adv < 0].mean() < 0
    assert (torch.sign(delta[adv != 0]) == torch.sign(adv[adv != 0])).float().mean() >= 0.75
    g2 = sum(float(p.grad.pow(2).sum()) for p in ref.parameters())
    assert float((adv * delta / lens).mean()) == pytest.approx(0.02 * g2, rel=0.1)


def test_second_update_uses_the_sampling_policy_as_old():
    dial = preset("grpo").replace(clip_low=0.05, clip_high=0.05)
    cfg = replace(CFG, optimizer="sgd", lr=0.5, grad_clip=None, updates_per_batch=2)
    model, tokenizer = tiny_policy(seed=2)
    batch = _batch(model, tokenizer, dial, cfg)
    adv = advantage.advantages(batch.rewards, batch.group_ids, dial)[batch.trained]
    train = batch.rollouts.select(batch.trained)

    ref = copy.deepcopy(model)
    old = response_logprobs(ref, train).detach()
    for _ in range(2):  # both updates against the same old log-probs (ratio != 1 the 2nd time)
        ref.zero_grad()
        advantage.policy_loss(response_logprobs(ref, train), old, adv, train.response_mask,
                              dial).backward()  # fmt: skip
        with torch.no_grad():
            for p in ref.parameters():
                p -= 0.5 * p.grad
    policy_update(model, make_optimizer(model, cfg), train, adv, dial, cfg)
    for p, q in zip(model.parameters(), ref.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)


def test_first_update_reuses_the_samplers_projections_within_the_budget(monkeypatch):
    """The batch keeps the sampler's projection outputs when they fit activation_reuse_mb
    (also across DAPO refill rounds), and the update taken with them equals the recomputed one."""
    from grpo_dial.policy import activation_record as recording
    from grpo_dial.policy.rollout import Rollouts, sample

    monkeypatch.setattr(sample, "COMPACT_AT", 2.0)  # rows stay in the decode batch: all recorded

    model, tokenizer = tiny_policy(seed=4)
    size = recording.recorded_bytes(model, CFG.prompts_per_step * CFG.group_size, 7) / 2**20
    for budget, kept in ((0.0, False), (size * 0.99, False), (size, True)):
        cfg = replace(CFG, activation_reuse_mb=budget)
        assert (_batch(model, tokenizer, preset("grpo"), cfg).rollouts.recorded is not None) == kept
    model, tokenizer = tiny_policy(seed=1)  # a seed with refills (as the DAPO test below)
    dapo, cfg = preset("dapo"), replace(CFG, prompts_per_step=6)
    batch = _batch(model, tokenizer, dapo, cfg)
    assert batch.rounds.max() > 0 and batch.rollouts.recorded is not None
    adv = advantage.advantages(batch.rewards, batch.group_ids, dapo)[batch.trained]
    train = batch.rollouts.select(batch.trained)
    plain = copy.deepcopy(model)  # another model: the record applies only to `model`
    used = []
    known = recording.known_projector
    monkeypatch.setattr(recording, "known_projector", lambda k, h: used.append(1) or known(k, h))
    results = []
    for m, rollouts in ((model, train), (plain, Rollouts(**{**train.__dict__, "recorded": None}))):
        out = policy_update(m, make_optimizer(m, cfg), rollouts, adv, dapo, cfg)
        results.append((out, list(m.parameters())))
        assert bool(used) == (m is model)
        used.clear()
    (a, pa), (b, pb) = results
    assert a.loss == pytest.approx(b.loss, rel=1e-5, abs=1e-7)
    assert a.grad_norm == pytest.approx(b.grad_norm, rel=1e-4)
    for p, q in zip(pa, pb, strict=True):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)


def _single_backward_update(model, train, adv, dial, cfg, ref_logp=None):
    """The update as one loss over the whole batch and ONE backward (the reference the
    per-bucket update must equal): SGD steps by hand, old log-probs from the first forward."""
    old = None
    for _ in range(cfg.updates_per_batch):
        model.zero_grad()
        logp = response_logprobs(model, train)  # (B, T), one graph for every row
        old = logp.detach() if old is None else old
        loss = advantage.policy_loss(logp, old, adv, train.response_mask, dial)
        if ref_logp is not None:
            d = ref_logp - logp
            loss = loss + cfg.kl_coef * advantage.aggregate(d.exp() - d - 1, train.response_mask,
                                                            dial)  # fmt: skip
        loss.backward()
        with torch.no_grad():
            for p in model.parameters():
                p -= cfg.lr * p.grad
    return loss


@pytest.mark.parametrize("name", ["grpo", "dr_grpo", "dapo"])
@pytest.mark.parametrize("kl", [False, True])
def test_per_bucket_backward_equals_the_single_backward_update(name, kl, monkeypatch):
    """micro_batch 2: every bucket's backward runs before the next bucket's forward, and the
    SGD steps (two per batch, so the second one has ratio != 1) equal one backward over the
    whole batch; a spy checks that no two buckets' graphs are alive at once."""
    from grpo_dial.train import step as train_step

    dial = preset(name).replace(clip_low=0.05, clip_high=0.05)
    cfg = replace(CFG, optimizer="sgd", lr=0.5, grad_clip=None, updates_per_batch=2,
                  micro_batch=2, kl_coef=0.3 if kl else 0.0, prompts_per_step=6)  # fmt: skip
    model, tokenizer = tiny_policy(seed=2)
    batch = _batch(model, tokenizer, dial, cfg)
    adv = advantage.advantages(batch.rewards, batch.group_ids, dial)[batch.trained]
    train = batch.rollouts.select(batch.trained)
    assert (adv == 0).any() or name == "dapo"
    ref_logp = None
    if kl:
        with torch.no_grad():
            ref_logp = response_logprobs(tiny_policy(seed=5)[0], train)  # another policy
    ref = copy.deepcopy(model)
    _single_backward_update(ref, train, adv, dial, cfg, ref_logp)

    held, seen = [], []  # weak references to every tensor an autograd graph saved
    real = train_step.bucket_logprobs

    class Saved:
        __slots__ = ("t", "__weakref__")

    def pack(t):
        box = Saved()
        box.t = t
        held.append(weakref.ref(box))
        return box

    def spy(m, rollouts, micro_batch):
        buckets = real(m, rollouts, micro_batch)
        while True:  # before each bucket's forward, the earlier buckets' graphs are gone
            assert not any(h() is not None for h in held)
            item = next(buckets, None)
            if item is None:
                return
            seen.append(len(item[0]))
            yield item

    monkeypatch.setattr(train_step, "bucket_logprobs", spy)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda box: box.t):
        result = policy_update(model, make_optimizer(model, cfg), train, adv, dial, cfg, ref_logp)
    assert held, "the spy saw no graph"
    assert result.finite and len(seen) > 2 and max(seen) <= 2
    for p, q in zip(model.parameters(), ref.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kl", [False, True])
def test_learnable_lambda_per_bucket_equals_one_backward_through_the_weights(kl):
    """lambda-GRPO with a learnable lambda: the per-bucket update (weights fixed at the current
    lambda, lambda's gradient from the buckets' loss sums afterwards) takes the same SGD steps,
    for the policy and for lambda, as one backward of the whole batch's loss with the weights
    f_i(lambda) in the graph, written here from the paper's formula."""
    from grpo_dial.core.token_weights import lambda_factors
    from grpo_dial.train import estimator

    dial = preset("lambda_grpo").replace(lambda_value=0.3, lambda_lr=0.7, clip_low=0.05,
                   clip_high=0.05)  # fmt: skip
    cfg = replace(CFG, optimizer="sgd", lr=0.5, grad_clip=None, updates_per_batch=2,
                  micro_batch=2, kl_coef=0.3 if kl else 0.0, prompts_per_step=6)  # fmt: skip
    model, tokenizer = tiny_policy(seed=2)
    batch = _batch(model, tokenizer, dial, cfg)
    adv = advantage.advantages(batch.rewards, batch.group_ids, dial)[batch.trained]
    train = batch.rollouts.select(batch.trained)
    assert (adv != 0).any()
    ref_logp = None
    if kl:
        with torch.no_grad():
            ref_logp = response_logprobs(tiny_policy(seed=5)[0], train)
    ref, ref_lam = copy.deepcopy(model), torch.tensor(0.3, dtype=torch.float64, requires_grad=True)
    mask = train.response_mask.bool().double()  # (B, T)
    old = None
    for _ in range(cfg.updates_per_batch):
        ref.zero_grad(set_to_none=True)
        ref_lam.grad = None
        logp = response_logprobs(ref, train)
        old = logp.detach() if old is None else old
        tokens = advantage.clipped_surrogate(logp, old, adv, dial)
        if ref_logp is not None:
            d = ref_logp - logp
            tokens = tokens + cfg.kl_coef * (d.exp() - d - 1)
        f = lambda_factors(mask.sum(-1), train.group_ids, ref_lam, dial.lambda_r)  # (B,)
        w = mask * f[:, None] / mask.sum()  # (B, T), lambda in the graph
        loss = torch.where(mask > 0, tokens.double() * w, 0.0).sum()
        loss.backward()
        with torch.no_grad():
            for p in ref.parameters():
                p -= cfg.lr * p.grad
            ref_lam -= dial.lambda_lr * ref_lam.grad
    lam = estimator.new_lambda(dial, "cpu")
    optimizer = make_optimizer(model, cfg)
    estimator.attach_lambda(optimizer, lam, dial)
    result = policy_update(model, optimizer, train, adv, dial, cfg, ref_logp, lam)
    assert result.finite
    assert float(lam.detach()) != pytest.approx(0.3, abs=1e-9)  # lambda moved
    assert float(lam.detach()) == pytest.approx(float(ref_lam.detach()), rel=1e-5, abs=1e-8)
    for p, q in zip(model.parameters(), ref.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------------- DAPO refill


def test_dapo_refill_trains_only_informative_groups_and_counts_samples():
    model, tokenizer = tiny_policy(seed=0)
    cfg = replace(CFG, prompts_per_step=6)
    dapo = _batch(model, tokenizer, preset("dapo"), cfg)
    grpo = _batch(model, tokenizer, preset("grpo"), cfg)
    k, size = _k(dapo)
    informative = (k > 0) & (k < size)  # (M,)
    assert (~informative).any() and dapo.resampled_prompts > 0, "seed must produce refills"
    stats = group_stats(dapo.rewards, dapo.group_ids)
    assert torch.equal(dapo.trained, informative[stats.index])
    assert int(informative.sum()) <= cfg.prompts_per_step
    assert len(dapo.rollouts) == cfg.group_size * (cfg.prompts_per_step + dapo.resampled_prompts)
    assert int((dapo.rounds > 0).sum()) == cfg.group_size * dapo.resampled_prompts
    # Round 0 is the same draw every dial sees; a keep-dial trains on all of it.
    n0 = int((dapo.rounds == 0).sum())
    assert dapo.rollouts.texts[:n0] == grpo.rollouts.texts and grpo.trained.all()


def test_dapo_counts_every_round_when_nothing_is_informative():
    model, tokenizer = tiny_policy(seed=0)
    dial = preset("dapo").replace(max_resample_rounds=2)
    batch = _batch(model, tokenizer, dial, CFG, task=NeverRight())
    assert not batch.trained.any()
    assert batch.resampled_prompts == 2 * CFG.prompts_per_step
    assert len(batch.rollouts) == 3 * CFG.prompts_per_step * CFG.group_size
    assert sorted(set(batch.rounds.tolist())) == [0, 1, 2]
    records = rec.new_records()
    result = UpdateResult(math.nan, math.nan, math.nan, True)
    adv = torch.zeros(len(batch.rollouts))
    rec.record_step(records, 1, batch, adv, result, dial, {}, ("easy", "hard"), 1e-3, 0.0)
    assert records["mass"][0]["n_groups"] == [0, 0] and np.isnan(records["mass"][0]["share"]).all()
    assert records["steps"][0]["samples"] == [len(batch.rollouts)]
    assert records["steps"][0]["trained_groups"] == [0]


# --------------------------------------------------------------------------- lr matching


def test_update_norm_sgd_is_lr_times_grad_norm_and_leaves_model_alone():
    model, tokenizer = tiny_policy(seed=2)
    state = copy.deepcopy(model.state_dict())
    cfg = replace(CFG, optimizer="sgd", lr=0.1, grad_clip=None, prompts_per_step=6)
    norms = {}
    for name in ("grpo", "dr_grpo"):
        dial = preset(name)
        batch = _batch(model, tokenizer, dial, cfg)
        adv = advantage.advantages(batch.rewards, batch.group_ids, dial)[batch.trained]
        train = batch.rollouts.select(batch.trained)
        ref = copy.deepcopy(model)
        advantage.policy_loss(*(lambda lp: (lp, lp.detach()))(response_logprobs(ref, train)),
                              adv, train.response_mask, dial).backward()  # fmt: skip
        grad = math.sqrt(sum(float(p.grad.double().pow(2).sum()) for p in ref.parameters()))
        norms[name] = update_norm(model, batch, dial, cfg)
        assert norms[name] == pytest.approx(0.1 * grad, rel=1e-4)
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, state[name])
    assert lr_match_factor(norms["grpo"], norms["dr_grpo"]) > 5  # sigma vs sigma^2 / L_max


def test_update_norm_adam_is_nearly_scale_free():
    model, tokenizer = tiny_policy(seed=2)
    cfg = replace(CFG, lr=1e-3, grad_clip=None, prompts_per_step=6)
    norms = {}
    for name in ("grpo", "dr_grpo"):
        batch = _batch(model, tokenizer, preset(name), cfg)
        norms[name] = update_norm(model, batch, preset(name), cfg)
    n_params = sum(p.numel() for p in model.parameters())
    # First AdamW step ~ lr sign(g): norm ~ lr sqrt(#params), whatever the gradient's scale.
    assert norms["grpo"] == pytest.approx(1e-3 * math.sqrt(n_params), rel=0.1)
    assert lr_match_factor(norms["grpo"], norms["dr_grpo"]) == pytest.approx(1.0, abs=0.05)
    assert calibration_update_norm(
        model, tokenizer, FakeTask(), preset("grpo"), cfg
    ) == pytest.approx(norms["grpo"], rel=1e-12)


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf])
def test_lr_match_factor_rejects(bad):
    assert lr_match_factor(2.0, 0.5) == 4.0
    with pytest.raises(ValueError, match="arm_norm must be a finite number > 0"):
        lr_match_factor(1.0, bad)
