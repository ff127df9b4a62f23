"""Response log-probs against uncached one-token references and one padded forward; the bucket
planner against every contiguous cut."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from _rollout_fixtures import make_problems, real_tokens, sample_groups, tiny_model, tiny_tokenizer

from grpo_dial.policy.rollout import logprobs, plan_buckets, response_logprobs


@pytest.fixture(scope="module")
def tok():
    return tiny_tokenizer()


@pytest.fixture(scope="module")
def model(tok):
    return tiny_model(tok)


def test_logprobs_match_uncached_token_by_token_reference(model, tok):
    r = sample_groups(model, tok)
    lp = response_logprobs(model, r)  # (N, T)
    assert lp.shape == r.response_ids.shape
    assert torch.all(lp[r.response_mask == 0] == 0)
    model.eval()
    with torch.no_grad():
        for i in range(0, len(r), 3):  # every third row: short, long, finished, unfinished
            seq = real_tokens(r.prompt_ids[i], r.prompt_mask[i])
            resp = real_tokens(r.response_ids[i], r.response_mask[i])
            for t, o in enumerate(resp):
                logits = model(torch.tensor([seq]), use_cache=False).logits[0, -1]
                ref = torch.log_softmax(logits, -1)[o]
                assert abs(lp[i, t].item() - ref.item()) < 1e-5
                seq.append(o)


def test_logprobs_are_differentiable_and_micro_batch_invariant(model, tok):
    r = sample_groups(model, tok, seed=1)
    model.zero_grad()
    full = response_logprobs(model, r)
    full.sum().backward()
    grad = model.model.embed_tokens.weight.grad
    assert grad is not None and grad.abs().sum() > 0
    with torch.no_grad():
        split = response_logprobs(model, r, micro_batch=5)
    assert torch.allclose(full.detach(), split, atol=1e-6)
    with pytest.raises(ValueError, match="micro_batch"):
        response_logprobs(model, r, micro_batch=0)


def test_left_padding_does_not_change_logprobs(model, tok):
    short = make_problems(["7="])
    alone = sample_groups(model, tok, problems=short, g=1, max_new=8, temperature=0.0)
    longer = make_problems(["99*9-14+3="])
    batched = sample_groups(model, tok, problems=[*short, *longer], g=1, max_new=8, temperature=0.0)
    assert batched.prompt_mask[0].sum() < batched.prompt_mask.shape[1]  # really padded
    t = alone.response_ids.shape[1]
    assert torch.equal(alone.response_ids[0], batched.response_ids[0, :t])
    with torch.no_grad():
        la = response_logprobs(model, alone)[0]
        lb = response_logprobs(model, batched)[0, :t]
    assert torch.allclose(la, lb, atol=1e-5)


def _bucket_cost(p, t, parts, overhead):
    return sum(len(b) * (p[b].max() + t[b].max()) + overhead for b in parts)


def test_plan_buckets_is_the_cheapest_contiguous_cut():
    rng = np.random.default_rng(0)
    for _ in range(20):
        n = int(rng.integers(1, 8))
        p, t = rng.integers(1, 9, n), rng.integers(0, 30, n)
        max_rows, overhead = int(rng.integers(1, 5)), float(rng.integers(0, 40))
        parts = plan_buckets(p, t, max_rows, overhead)
        assert sorted(np.concatenate(parts).tolist()) == list(range(n))
        assert all(1 <= len(b) <= max_rows for b in parts)
        order = np.lexsort((p, t))
        best = math.inf
        for cuts in itertools.product([0, 1], repeat=n - 1):  # every contiguous partition
            bounds = [0, *[i + 1 for i, c in enumerate(cuts) if c], n]
            chunks = [order[a:b] for a, b in itertools.pairwise(bounds)]
            if all(len(c) <= max_rows for c in chunks):
                best = min(best, _bucket_cost(p, t, chunks, overhead))
        assert _bucket_cost(p, t, parts, overhead) == pytest.approx(best)


def test_bucketed_logprobs_equal_one_padded_forward(model, tok, monkeypatch):
    # shared prompts across groups and very different lengths: dedup and buckets both matter
    probs = make_problems(["7=", "12+3=", "7=", "99*9-14="])
    r = sample_groups(model, tok, problems=probs, g=[3, 2, 2, 3], max_new=16, seed=12)
    ids = torch.cat([r.prompt_ids, r.response_ids], 1)
    attn = torch.cat([r.prompt_mask, r.response_mask], 1)
    pos = (attn.cumsum(1) - 1).clamp(min=0)
    t = r.response_ids.shape[1]
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=attn, position_ids=pos).logits
        ref = torch.log_softmax(logits[:, -(t + 1) : -1].float(), -1)
        ref = ref.gather(-1, r.response_ids[..., None])[..., 0] * r.response_mask
        monkeypatch.setattr(logprobs, "FORWARD_OVERHEAD_TOKENS", 0)  # many small buckets
        many = response_logprobs(model, r)
        monkeypatch.setattr(logprobs, "FORWARD_OVERHEAD_TOKENS", 10**9)  # one bucket
        one = response_logprobs(model, r)
        small = response_logprobs(model, r, micro_batch=3)
    for lp in (many, one, small):
        assert torch.allclose(lp, ref, atol=1e-5)


def test_update_without_silent_rows_equals_the_full_batch_update(model, tok, monkeypatch):
    import copy

    from grpo_dial.core.dial import dial_from_config
    from grpo_dial.train import step as train_step
    from grpo_dial.train.config import TrainConfig

    r = sample_groups(model, tok, g=4, max_new=10, seed=13)
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0] + [0.0] * 4 + [1.0] * 4)  # group 1, 2 silent
    sgd = TrainConfig(updates_per_batch=2, lr=0.1, optimizer="sgd", progress=False)
    adam = TrainConfig(updates_per_batch=2, lr=1e-2, progress=False)
    dial = dial_from_config({"preset": "grpo"})
    adv = train_step.advantage.advantages(rewards, r.group_ids, dial)
    assert (adv == 0).sum() == 8

    def update(skip: bool, adv, config):
        m = copy.deepcopy(model).eval()
        opt = train_step.make_optimizer(m, config)
        if not skip:  # the plain path: every row forwarded
            monkeypatch.setattr(
                train_step, "_update_rows", lambda tr, act: (torch.arange(len(tr)), tr)
            )
        first = train_step.policy_update(m, opt, r, adv, dial, config)
        second = train_step.policy_update(m, opt, r, torch.zeros_like(adv), dial, config)
        monkeypatch.undo()
        return m, first, second

    fast, f1, f2 = update(True, adv, sgd)  # SGD: the update is linear in the gradient
    plain, p1, p2 = update(False, adv, sgd)
    assert f1.loss == pytest.approx(p1.loss, abs=1e-7)
    assert f1.grad_norm == pytest.approx(p1.grad_norm, rel=1e-5)
    for a, b in zip(fast.parameters(), plain.parameters(), strict=True):
        assert torch.allclose(a, b, atol=1e-7)
    # AdamW: the all-silent second update still steps on momentum, in both paths
    fast, f1, f2 = update(True, adv, adam)
    plain, p1, p2 = update(False, adv, adam)
    assert f2.loss == p2.loss == 0.0 and f2.finite
    pairs = zip(fast.parameters(), model.parameters(), strict=True)
    moved = [(a - b).abs().max() for a, b in pairs]
    assert min(moved) > 1e-3  # four steps of lr 1e-2 each
    for a, b in zip(fast.parameters(), plain.parameters(), strict=True):
        assert torch.allclose(a, b, atol=1e-4)  # Adam scales float noise of tiny gradients


def test_checkpointed_generic_model_forwards_each_bucket_once(tok):
    """Hugging Face layers return no cache under gradient checkpointing: the prompt is not
    forwarded on its own first (one forward per bucket), and the log-probs are unchanged."""
    import copy

    from transformers import Qwen2Config, Qwen2ForCausalLM

    from grpo_dial.policy.model import enable_gradient_checkpointing

    qwen = Qwen2ForCausalLM(
        Qwen2Config(vocab_size=len(tok), hidden_size=32, intermediate_size=48,
                    num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2)
    ).eval()  # fmt: skip
    r = sample_groups(qwen, tok, g=3, max_new=8, seed=2)
    ckpt = copy.deepcopy(qwen)
    enable_gradient_checkpointing(ckpt)
    calls = []
    ckpt.register_forward_pre_hook(lambda mod, args: calls.append(1))
    lp = response_logprobs(ckpt, r, micro_batch=len(r))
    assert len(calls) == 1 and lp.requires_grad
    with torch.no_grad():
        assert torch.allclose(lp.detach(), response_logprobs(qwen, r), atol=1e-5)
