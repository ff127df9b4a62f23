"""Group sampling with a KV cache and response log-probs, against uncached one-token references."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from grpo_dial.data.tasks.base import Problem
from grpo_dial.policy import lean_llama, rollout
from grpo_dial.policy.model import PolicySpec, build_char_tokenizer, build_tiny_llama
from grpo_dial.policy.rollout import (
    Rollouts,
    concat,
    generate_groups,
    plan_buckets,
    response_logprobs,
)

SMALL = PolicySpec(n_layers=2, hidden_size=32, n_heads=2, intermediate_size=64)
PROMPTS = ["7=", "12+3=", "99*9-14="]  # different lengths: left padding matters


@pytest.fixture(scope="module")
def tok():
    return build_char_tokenizer("0123456789+-*=;")


@pytest.fixture(scope="module")
def model(tok):
    return build_tiny_llama(SMALL, tok, seed=0)


def _problems(texts=PROMPTS):
    return [Problem(f"p{i}", t, "0", "d") for i, t in enumerate(texts)]


def _sample(model, tok, problems=None, g=4, max_new=12, seed=0, temperature=1.0):
    gen = torch.Generator().manual_seed(seed)
    return generate_groups(
        model, tok, problems or _problems(), g, max_new, temperature=temperature, generator=gen
    )


def _real_tokens(ids, mask):
    return ids[mask.bool()].tolist()


def test_logprobs_match_uncached_token_by_token_reference(model, tok):
    r = _sample(model, tok)
    lp = response_logprobs(model, r)  # (N, T)
    assert lp.shape == r.response_ids.shape
    assert torch.all(lp[r.response_mask == 0] == 0)
    model.eval()
    with torch.no_grad():
        for i in range(0, len(r), 3):  # every third row: short, long, finished, unfinished
            seq = _real_tokens(r.prompt_ids[i], r.prompt_mask[i])
            resp = _real_tokens(r.response_ids[i], r.response_mask[i])
            for t, o in enumerate(resp):
                logits = model(torch.tensor([seq]), use_cache=False).logits[0, -1]
                ref = torch.log_softmax(logits, -1)[o]
                assert abs(lp[i, t].item() - ref.item()) < 1e-5
                seq.append(o)


def test_logprobs_are_differentiable_and_micro_batch_invariant(model, tok):
    r = _sample(model, tok, seed=1)
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


def test_greedy_equals_hf_generate(model, tok):
    r = _sample(model, tok, g=1, max_new=10, temperature=0.0)
    batch = tok(PROMPTS, padding=True, return_tensors="pt")  # bos + text, left-padded
    assert torch.equal(batch["input_ids"], r.prompt_ids)
    model.eval()
    out = model.generate(**batch, do_sample=False, max_new_tokens=10)
    hf = out[:, batch["input_ids"].shape[1] :]
    t = r.response_ids.shape[1]
    assert torch.equal(r.response_ids, hf[:, :t])
    # greedy is the temperature -> 0 limit of sampling
    cold = _sample(model, tok, g=1, max_new=10, temperature=1e-4, seed=9)
    assert torch.equal(cold.response_ids, r.response_ids)


def test_same_generator_seed_same_rollouts(model, tok):
    a, b, c = (_sample(model, tok, seed=s) for s in (5, 5, 6))
    for field in ("prompt_ids", "response_ids", "response_mask", "finished", "group_ids"):
        assert torch.equal(getattr(a, field), getattr(b, field))
    assert a.texts == b.texts
    assert not torch.equal(a.response_ids[:, :2], c.response_ids[:, :2])


def test_groups_masks_and_finished_with_early_stops(model, tok):
    # an untrained model emits <eos> with probability ~1/19 per step: some rows stop, some not
    g, max_new = 4, 20
    r = _sample(model, tok, g=g, max_new=max_new, seed=2)
    n = len(PROMPTS) * g
    assert len(r) == n and len(r.texts) == n
    assert torch.equal(r.group_ids, torch.arange(3).repeat_interleave(g))
    assert [p.prompt_id for p in r.problems] == [f"p{i}" for i in range(3) for _ in range(g)]
    assert 0 < r.finished.sum() < n
    eos, pad = tok.eos_token_id, tok.pad_token_id
    for i in range(n):
        ids, mask = r.response_ids[i].tolist(), r.response_mask[i].tolist()
        length = sum(mask)
        assert mask == [1] * length + [0] * (len(mask) - length)  # a prefix
        assert all(x == pad for x in ids[length:])
        body = ids[:length]
        if r.finished[i]:
            assert body[-1] == eos and eos not in body[:-1]
            body = body[:-1]
        else:
            assert length == max_new and eos not in body
        assert r.texts[i] == tok.decode(body)
        assert r.response_lengths[i] == length
    # prompts: bos + text, left-padded, identical within a group
    for i in range(n):
        assert (
            tok.decode(_real_tokens(r.prompt_ids[i], r.prompt_mask[i]))
            == "<bos>" + (PROMPTS[i // g])
        )


def test_loop_stops_when_all_finished(model, tok):
    r = _sample(model, tok, problems=_problems(["5="]), g=6, max_new=300, seed=3)
    assert r.finished.all()
    assert r.response_ids.shape[1] == int(r.response_lengths.max()) < 300


def test_singleton_groups(model, tok):
    r = _sample(model, tok, g=1, max_new=5)
    assert torch.equal(r.group_ids, torch.arange(3))
    assert r.response_ids.shape[0] == 3


def test_per_problem_group_sizes_are_problem_major(model, tok):
    r = _sample(model, tok, g=[2, 1, 3], max_new=6, seed=4)
    assert r.group_ids.tolist() == [0, 0, 1, 2, 2, 2]
    assert [p.prompt_id for p in r.problems] == ["p0", "p0", "p1", "p2", "p2", "p2"]
    uniform = _sample(model, tok, g=[4, 4, 4], max_new=6, seed=5)
    same = _sample(model, tok, g=4, max_new=6, seed=5)
    assert uniform.texts == same.texts and torch.equal(uniform.group_ids, same.group_ids)


def test_left_padding_does_not_change_logprobs(model, tok):
    short = _problems(["7="])
    alone = _sample(model, tok, problems=short, g=1, max_new=8, temperature=0.0)
    batched = _sample(
        model, tok, problems=[*short, *_problems(["99*9-14+3="])], g=1, max_new=8, temperature=0.0
    )
    assert batched.prompt_mask[0].sum() < batched.prompt_mask.shape[1]  # really padded
    t = alone.response_ids.shape[1]
    assert torch.equal(alone.response_ids[0], batched.response_ids[0, :t])
    with torch.no_grad():
        la = response_logprobs(model, alone)[0]
        lb = response_logprobs(model, batched)[0, :t]
    assert torch.allclose(la, lb, atol=1e-5)


def test_concat_renumbers_groups_and_keeps_logprobs(model, tok):
    a = _sample(model, tok, problems=_problems(["7="]), g=2, max_new=6, seed=1)
    b = _sample(model, tok, g=3, max_new=9, seed=2)
    c = concat([a, b])
    assert torch.equal(c.group_ids, torch.tensor([0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]))
    assert c.texts == a.texts + b.texts and len(c.problems) == 11
    assert torch.equal(c.finished, torch.cat([a.finished, b.finished]))
    with torch.no_grad():
        lc = response_logprobs(model, c)
        la, lb = response_logprobs(model, a), response_logprobs(model, b)
    assert torch.allclose(lc[:2, : la.shape[1]], la, atol=1e-5)
    assert torch.allclose(lc[2:, : lb.shape[1]], lb, atol=1e-5)
    assert torch.all(lc[:2, la.shape[1] :] == 0)
    assert torch.equal(c.response_lengths, torch.cat([a.response_lengths, b.response_lengths]))
    with pytest.raises(ValueError, match="at least one"):
        concat([])


def test_select_keeps_rows_and_renumbers(model, tok):
    r = _sample(model, tok, g=2, max_new=4)
    s = r.select(r.group_ids != 1)
    assert isinstance(s, Rollouts) and len(s) == 4
    assert torch.equal(s.group_ids, torch.tensor([0, 0, 1, 1]))
    assert [p.prompt for p in s.problems] == ["7=", "7=", "99*9-14=", "99*9-14="]
    assert torch.equal(s.response_ids, r.response_ids[[0, 1, 4, 5]])


def test_prompt_texts_override_and_model_mode_restored(model, tok):
    model.train()
    r = generate_groups(
        model,
        tok,
        _problems()[:2],
        1,
        3,
        prompt_texts=["1=", "2="],
        generator=torch.Generator().manual_seed(0),
    )
    assert model.training
    model.eval()
    assert tok.decode(_real_tokens(r.prompt_ids[1], r.prompt_mask[1])) == "<bos>2="


def test_bad_arguments(model, tok):
    with pytest.raises(ValueError, match="group_size"):
        generate_groups(model, tok, _problems(), 0, 5)
    with pytest.raises(ValueError, match="group_size"):
        generate_groups(model, tok, _problems(), [2, 0, 1], 5)
    with pytest.raises(ValueError, match="3 problems"):
        generate_groups(model, tok, _problems(), [2, 2], 5)
    with pytest.raises(ValueError, match="max_new_tokens"):
        generate_groups(model, tok, _problems(), 2, 0)
    with pytest.raises(ValueError, match="temperature"):
        generate_groups(model, tok, _problems(), 2, 5, temperature=-1.0)
    with pytest.raises(ValueError, match="prompt_texts"):
        generate_groups(model, tok, _problems(), 2, 5, prompt_texts=["1="])
    with pytest.raises(ValueError, match="at least one problem"):
        generate_groups(model, tok, [], 2, 5)
    with pytest.raises(ValueError, match="generation_batch"):
        generate_groups(model, tok, _problems(), 2, 5, generation_batch=0)


# --------------------------------------------------------------------------- fast paths


def _reference_sampling(model, tok, texts, g, max_new, seed):
    """The plain loop: no cache, every row in every step, torch.multinomial on all N rows."""
    enc = tok(texts, padding=True, return_tensors="pt")
    ids = enc["input_ids"].repeat_interleave(g, 0)  # (N, P)
    attn = enc["attention_mask"].repeat_interleave(g, 0)  # (N, P)
    gen = torch.Generator().manual_seed(seed)
    n = ids.shape[0]
    finished = torch.zeros(n, dtype=torch.bool)
    out = []
    with torch.no_grad():
        for _ in range(max_new):
            pos = (attn.cumsum(1) - 1).clamp(min=0)
            logits = model(input_ids=ids, attention_mask=attn, position_ids=pos).logits[:, -1]
            tok_ = torch.multinomial(torch.softmax(logits.float(), -1), 1, generator=gen)[:, 0]
            tok_ = torch.where(finished, tok.pad_token_id, tok_)
            out.append(tok_)
            finished = finished | (tok_ == tok.eos_token_id)
            if finished.all():
                break
            ids = torch.cat([ids, tok_[:, None]], 1)
            attn = torch.cat([attn, torch.ones((n, 1), dtype=attn.dtype)], 1)
    return torch.stack(out, 1), finished


@pytest.mark.parametrize("compact_at", [0.0, 0.125, math.inf])
def test_compaction_gives_the_plain_loops_tokens(model, tok, monkeypatch, compact_at):
    # 0: rows leave the batch as soon as one finishes; inf: they never leave
    monkeypatch.setattr(rollout, "COMPACT_AT", compact_at)
    model.eval()
    r = _sample(model, tok, g=5, max_new=25, seed=11)
    ref, ref_finished = _reference_sampling(model, tok, PROMPTS, 5, 25, seed=11)
    assert 0 < r.finished.sum() < len(r)  # rows really finish early
    assert torch.equal(r.finished, ref_finished)
    assert torch.equal(r.response_ids, ref[:, : r.response_ids.shape[1]])


def test_generation_batch_layout_and_reproducibility(model, tok):
    whole = _sample(model, tok, g=[3, 2, 4], max_new=10, seed=7)
    gen = torch.Generator().manual_seed(7)
    big = generate_groups(model, tok, _problems(), [3, 2, 4], 10, generator=gen, generation_batch=9)
    assert big.texts == whole.texts  # one call of all rows is the default
    runs = []
    for _ in range(2):
        gen = torch.Generator().manual_seed(7)
        runs.append(
            generate_groups(model, tok, _problems(), [3, 2, 4], 10, generator=gen,
                            generation_batch=4)  # fmt: skip
        )
    a, b = runs
    assert a.texts == b.texts and torch.equal(a.response_ids, b.response_ids)
    for field in ("group_ids", "prompt_ids", "prompt_mask"):
        assert torch.equal(getattr(a, field), getattr(whole, field))
    lengths = a.response_mask.sum(1)
    assert a.response_ids.shape[1] == int(lengths.max())
    # chunks cut groups (rows 0-3, 4-7, 8): the log-probs still match the uncached reference
    with torch.no_grad():
        lp = response_logprobs(model, a)
        for i in (2, 3, 4, 8):
            seq = _real_tokens(a.prompt_ids[i], a.prompt_mask[i])
            for t, o in enumerate(_real_tokens(a.response_ids[i], a.response_mask[i])):
                logits = model(torch.tensor([seq]), use_cache=False).logits[0, -1]
                assert abs(lp[i, t].item() - torch.log_softmax(logits, -1)[o].item()) < 1e-5
                seq.append(o)


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
    probs = _problems(["7=", "12+3=", "7=", "99*9-14="])
    r = _sample(model, tok, problems=probs, g=[3, 2, 2, 3], max_new=16, seed=12)
    ids = torch.cat([r.prompt_ids, r.response_ids], 1)
    attn = torch.cat([r.prompt_mask, r.response_mask], 1)
    pos = (attn.cumsum(1) - 1).clamp(min=0)
    t = r.response_ids.shape[1]
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=attn, position_ids=pos).logits
        ref = torch.log_softmax(logits[:, -(t + 1) : -1].float(), -1)
        ref = ref.gather(-1, r.response_ids[..., None])[..., 0] * r.response_mask
        monkeypatch.setattr(rollout, "FORWARD_OVERHEAD_TOKENS", 0)  # many small buckets
        many = response_logprobs(model, r)
        monkeypatch.setattr(rollout, "FORWARD_OVERHEAD_TOKENS", 10**9)  # one bucket
        one = response_logprobs(model, r)
        small = response_logprobs(model, r, micro_batch=3)
    for lp in (many, one, small):
        assert torch.allclose(lp, ref, atol=1e-5)


def test_update_without_silent_rows_equals_the_full_batch_update(model, tok, monkeypatch):
    import copy

    from grpo_dial.core.advantage import dial_from_config
    from grpo_dial.train import step as train_step
    from grpo_dial.train.config import TrainConfig

    r = _sample(model, tok, g=4, max_new=10, seed=13)
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
                train_step, "_active_logprobs", lambda mod, tr, mb, act: response_logprobs(mod, tr)
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


# --------------------------------------------------------------------------- lean decode


def _gqa_llama(tok, attn="sdpa"):
    """A tiny Llama with grouped-query attention (4 query heads on 2 key/value heads) and
    biases in every projection."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tok), hidden_size=32, intermediate_size=48, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id, attn_implementation=attn, attention_bias=True,
        mlp_bias=True,
    )  # fmt: skip
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(3)
        m = LlamaForCausalLM(config).eval()
        with torch.no_grad():
            for module in m.modules():
                if isinstance(module, torch.nn.Linear) and module.bias is not None:
                    module.bias.normal_(0.0, 0.2)  # initialized to 0: make them matter
    return m


def _record_logits(monkeypatch, lean: bool):
    """Run generation with (lean) or without the lean step; return the logits of every step."""
    seen = []
    sample = rollout._sample

    def spy(logits, *args):
        seen.append(logits.detach().clone())
        return sample(logits, *args)

    monkeypatch.setattr(rollout, "_sample", spy)
    if not lean:
        monkeypatch.setattr(lean_llama, "applies", lambda model: False)
    return seen


@pytest.mark.parametrize("which", ["mha", "gqa"])
@pytest.mark.parametrize("texts", [PROMPTS, ["12+3=", "45+6=", "78-9="]])  # padded, unpadded
def test_lean_decode_equals_the_generic_forward(model, tok, monkeypatch, which, texts):
    m = model if which == "mha" else _gqa_llama(tok)
    m.eval()
    assert lean_llama.applies(m)
    runs = []
    for lean in (True, False):
        seen = _record_logits(monkeypatch, lean)
        gen = torch.Generator().manual_seed(21)
        runs.append((generate_groups(m, tok, _problems(texts), 5, 20, generator=gen), seen))
        monkeypatch.undo()
    (a, la), (b, lb) = runs
    assert 0 < a.finished.sum() < len(a)  # rows finish and leave the batch mid-way
    for field in ("response_ids", "response_mask", "finished"):
        assert torch.equal(getattr(a, field), getattr(b, field))
    assert len(la) == len(lb) == a.response_ids.shape[1]
    for x, y in zip(la, lb, strict=True):
        assert x.shape == y.shape and torch.allclose(x, y, atol=1e-5, rtol=0)


def test_lean_forward_only_where_it_is_exact(model, tok):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    applies = lean_llama.applies
    assert applies(model) and applies(_gqa_llama(tok, attn="eager"))  # the same math
    assert not applies(_gqa_llama(tok, attn="flex_attention"))  # other attention kernels
    hooked = _gqa_llama(tok)
    handle = hooked.model.layers[1].self_attn.register_forward_hook(lambda mod, inp, out: out)
    assert not applies(hooked)  # a hook on a bypassed module
    handle.remove()
    seen = []
    handle = hooked.model.layers[0].self_attn.k_proj.register_forward_hook(
        lambda mod, inp, out: seen.append(1)
    )
    assert applies(hooked)  # modules it calls keep their hooks
    generate_groups(hooked, tok, _problems(), 2, 4, generator=torch.Generator().manual_seed(0))
    assert len(seen) >= 4  # prefill and every decode step
    handle.remove()
    hooked.config.attention_dropout = 0.1
    assert not applies(hooked)  # dropout in training mode
    qwen = Qwen2ForCausalLM(
        Qwen2Config(vocab_size=len(tok), hidden_size=32, intermediate_size=48,
                    num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2)
    )  # fmt: skip
    assert not applies(qwen)  # other architectures keep their own forward
    gen = torch.Generator().manual_seed(0)
    r = generate_groups(qwen, tok, _problems(), 2, 6, generator=gen)
    assert r.response_ids.shape[0] == 6


@pytest.mark.parametrize("which", ["mha", "gqa"])
def test_lean_logprobs_and_gradients_equal_the_generic_forward(model, tok, monkeypatch, which):
    import copy

    m = model if which == "mha" else _gqa_llama(tok)
    probs = _problems(["7=", "12+3=", "7=", "99*9-14="])  # shared and left-padded prompts
    r = _sample(m, tok, problems=probs, g=[3, 2, 2, 3], max_new=16, seed=12)
    assert r.response_mask.sum(1).unique().numel() > 2  # right padding too
    runs = []
    for lean in (True, False):
        if not lean:
            monkeypatch.setattr(lean_llama, "applies", lambda model: False)
        clone = copy.deepcopy(m)
        weights = torch.linspace(-1, 1, r.response_ids.numel()).view(r.response_ids.shape)
        lp = response_logprobs(clone, r, micro_batch=4)
        (lp * weights).sum().backward()
        runs.append((lp.detach(), [p.grad for p in clone.parameters()]))
        monkeypatch.undo()
    (a, ga), (b, gb) = runs
    assert torch.allclose(a, b, atol=1e-5, rtol=0)
    for x, y in zip(ga, gb, strict=True):
        assert torch.allclose(x, y, atol=1e-5, rtol=1e-4)


def test_fast_text_decoding_equals_batch_decode(tok):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from grpo_dial.policy.rollout import decode_texts

    rows = [[4, 5, 6, 2, 7], [], [9, 9, 3, 1, 0]]  # specials (eos, unk, bos, pad) kept
    assert decode_texts(tok, rows) == tok.batch_decode(rows, skip_special_tokens=False)
    core = Tokenizer(models.BPE(unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.ByteLevel()
    core.train_from_iterator(
        ["12 + 7 = 19", "the answer is 42", "  spaces  and\nnewlines"] * 20,
        trainers.BpeTrainer(vocab_size=300, special_tokens=["<unk>", "<eos>"]),
    )
    for cleanup in (False, True):
        bpe = PreTrainedTokenizerFast(
            tokenizer_object=core, eos_token="<eos>", clean_up_tokenization_spaces=cleanup
        )
        ids = bpe(["the answer is 42 .", " 12 + 7 = 19<eos>"])["input_ids"]
        assert decode_texts(bpe, ids) == bpe.batch_decode(ids, skip_special_tokens=False)


# --------------------------------------------------------------------------- projection reuse


def _count_reuse(monkeypatch) -> list[int]:
    """Counts the forwards that took recorded projection outputs."""
    calls = []
    original = lean_llama._known_projector

    def spy(known, holds):
        calls.append(1)
        return original(known, holds)

    monkeypatch.setattr(lean_llama, "_known_projector", spy)
    return calls


def _nan_buffers(monkeypatch):
    """Record buffers start as NaN: any position read but never written poisons the result."""
    original = lean_llama.record_buffers

    def poisoned(*args):
        buffers, lease = original(*args)
        for layer in buffers:
            for b in layer.values():
                b.fill_(math.nan)
        return buffers, lease

    monkeypatch.setattr(lean_llama, "record_buffers", poisoned)


def _logprobs_and_grads(model, rollouts, micro_batch=None):
    model.zero_grad(set_to_none=True)
    lp = response_logprobs(model, rollouts, micro_batch=micro_batch)
    weights = torch.linspace(-1, 1, lp.numel()).view(lp.shape)
    (lp * weights).sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    return lp.detach(), grads


@pytest.mark.parametrize("which", ["mha", "gqa"])
@pytest.mark.parametrize("generation_batch", [None, 7])
def test_reused_projections_give_the_forwards_logprobs_and_gradients(
    model, tok, monkeypatch, which, generation_batch
):
    """Shared and left-padded prompts, rows finishing at different lengths (kept in the decode
    batch, so every position is recorded), several decode calls, several buckets, a row
    subset: the log-probs and gradients from the sampler's recorded projections equal the
    recomputed ones."""
    m = model if which == "mha" else _gqa_llama(tok)  # gqa: biases in every projection
    monkeypatch.setattr(rollout, "COMPACT_AT", 2.0)  # rows never leave the decode batch
    probs = _problems(["7=", "12+3=", "7=", "99*9-14="])
    _nan_buffers(monkeypatch)  # a position read but never written would poison the result
    runs = {}
    for record in (True, False):
        gen = torch.Generator().manual_seed(12)
        runs[record] = generate_groups(
            m, tok, probs, [3, 2, 2, 3], 16, generator=gen,
            generation_batch=generation_batch, record=record,
        )  # fmt: skip
    r, plain = runs[True], runs[False]
    assert r.recorded is not None and plain.recorded is None
    assert torch.equal(r.response_ids, plain.response_ids)  # recording changes no token
    assert r.response_mask.sum(1).unique().numel() > 2 and 0 < r.finished.sum() < len(r)
    subset = torch.tensor([0, 2, 3, 7, 9])
    for rows in (None, subset):
        a_ro = r if rows is None else r.select(rows)
        b_ro = plain if rows is None else plain.select(rows)
        calls = _count_reuse(monkeypatch)
        a, ga = _logprobs_and_grads(m, a_ro, micro_batch=4)
        assert len(calls) >= 2  # every bucket reused the record
        b, gb = _logprobs_and_grads(m, b_ro, micro_batch=4)
        assert torch.allclose(a, b, atol=1e-5, rtol=0)
        for x, y in zip(ga, gb, strict=True):
            assert torch.allclose(x, y, atol=1e-5, rtol=1e-4)


def test_unwritten_record_positions_never_reach_the_result(model, tok, monkeypatch):
    """With every record buffer starting as NaN, rows that finish early and leave the decode
    batch (recording stops there) and decode calls of different lengths still give finite,
    equal log-probs and gradients: buckets needing unrecorded positions are recomputed."""
    _nan_buffers(monkeypatch)
    monkeypatch.setattr(rollout, "COMPACT_AT", 0.01)  # every finished row leaves at once
    probs = _problems(["7=", "12+3=", "99*9-14=", "5="])
    gen = torch.Generator().manual_seed(5)
    r = generate_groups(model, tok, probs, 4, 20, generator=gen, generation_batch=5, record=True)
    assert r.finished.sum() > 2 and r.response_mask.sum(1).unique().numel() > 3
    plain = Rollouts(**{**r.__dict__, "recorded": None})
    a, ga = _logprobs_and_grads(model, r)
    b, gb = _logprobs_and_grads(model, plain)
    assert torch.isfinite(a).all() and all(torch.isfinite(g).all() for g in ga)
    assert torch.allclose(a, b, atol=1e-5, rtol=0)
    for x, y in zip(ga, gb, strict=True):
        assert torch.allclose(x, y, atol=1e-5, rtol=1e-4)


def test_gather_returns_the_record_copies_or_none(model):
    buffers, _ = lean_llama.record_buffers(model, 3, 4, "cpu")
    for layer in buffers:
        for b in layer.values():
            b.copy_(torch.arange(3.0)[:, None, None].expand_as(b))  # row r holds r
    stamp = lean_llama.weights_stamp(model)
    rec = lean_llama.Recorded.of(buffers, stamp, torch.tensor([4, 4, 2]))
    assert rec.gather(torch.arange(3), 4) is None  # row 2 wrote only positions 0, 1
    part = rec.gather(torch.tensor([2, 0]), 2)
    assert part is not buffers and part[1]["down_proj"][:, :, 0].tolist() == [[2, 2], [0, 0]]
    sub = rec.take(torch.tensor([1, 0]))
    assert sub.gather(torch.tensor([1]), 4)[0]["q_proj"].eq(0).all()  # take composes rows
    whole = lean_llama.Recorded.of(buffers, stamp, torch.full((3,), 4))
    assert whole.gather(torch.arange(3), 4) is buffers  # all rows in order, all valid: no copy
    two = lean_llama.Recorded.concat([whole, rec.take(torch.tensor([2, 0]))])  # 3 + 2 rows
    assert len(two.sources) == 2 and two.valid.tolist() == [4, 4, 4, 4, 4, 2]
    assert two.gather(torch.arange(5), 4) is None  # rollout row 3 is recorded row 2: 2 valid
    got = two.gather(torch.tensor([4, 1, 3]), 2)[0]["o_proj"][:, :, 0]
    assert got.tolist() == [[0, 0], [1, 1], [2, 2]]  # rows from both sources, in request order


def test_a_record_is_used_only_with_the_weights_it_was_made_with(model, tok, monkeypatch):
    import copy

    monkeypatch.setattr(rollout, "COMPACT_AT", 2.0)  # every position recorded

    m = copy.deepcopy(model)
    gen = torch.Generator().manual_seed(3)
    r = generate_groups(m, tok, _problems(), 3, 12, generator=gen, record=True)
    plain = Rollouts(**{**r.__dict__, "recorded": None})
    calls = _count_reuse(monkeypatch)
    other = copy.deepcopy(m)  # the same weights, another model: not its record
    assert torch.equal(response_logprobs(other, r), response_logprobs(other, plain))
    assert not calls
    before = response_logprobs(m, r).detach()
    assert calls
    with torch.no_grad():  # any in-place change of any parameter (an optimizer step) voids it
        m.model.norm.weight.mul_(1.5)
    calls.clear()
    after = response_logprobs(m, r).detach()
    assert not calls
    assert torch.equal(after, response_logprobs(m, plain).detach())
    assert not torch.allclose(after, before, atol=1e-3)  # the stale record would be wrong


def test_concat_keeps_records_of_the_same_weights(model, tok, monkeypatch):
    monkeypatch.setattr(rollout, "COMPACT_AT", 2.0)  # every position recorded
    gen = torch.Generator().manual_seed(8)
    a = generate_groups(model, tok, _problems(["7=", "12+3="]), 3, 6, generator=gen, record=True)
    b = generate_groups(model, tok, _problems(["99*9-14="]), 2, 14, generator=gen, record=True)
    assert a.response_ids.shape[1] != b.response_ids.shape[1]
    both = concat([a, b])
    assert both.recorded is not None
    plain = concat([Rollouts(**{**x.__dict__, "recorded": None}) for x in (a, b)])
    calls = _count_reuse(monkeypatch)
    reused = response_logprobs(model, both, micro_batch=3)
    assert calls  # buckets within each part's recorded positions reuse the record
    assert torch.allclose(reused, response_logprobs(model, plain), atol=1e-5, rtol=0)
    unrecorded = Rollouts(**{**b.__dict__, "recorded": None})
    assert concat([a, unrecorded]).recorded is None


def test_recording_only_where_the_reusing_forward_is_the_same(model, tok):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    assert lean_llama.can_record(model)
    hooked = _gqa_llama(tok)
    handle = hooked.model.layers[0].mlp.up_proj.register_forward_hook(lambda m, i, o: o)
    assert lean_llama.applies(hooked) and not lean_llama.can_record(hooked)  # would bypass it
    gen = torch.Generator().manual_seed(0)
    sampled = generate_groups(hooked, tok, _problems(), 2, 5, generator=gen, record=True)
    assert sampled.recorded is None
    handle.remove()
    assert lean_llama.can_record(hooked)
    qwen = Qwen2ForCausalLM(
        Qwen2Config(vocab_size=len(tok), hidden_size=32, intermediate_size=48,
                    num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2)
    )  # fmt: skip
    assert not lean_llama.can_record(qwen)
    sampled = generate_groups(qwen, tok, _problems(), 2, 5, generator=gen, record=True)
    assert sampled.recorded is None
    spec = SMALL
    per_token = spec.n_layers * (5 * spec.hidden_size + 2 * spec.intermediate_size)
    assert lean_llama.recorded_bytes(model, 10, 7) == 4 * 10 * 7 * per_token


def test_record_buffers_are_reused_only_once_no_record_holds_them(model, tok):
    def storage(rollouts):
        return rollouts.recorded.sources[0][0]["up_proj"].data_ptr()

    probs = _problems(["7=", "12+3="])
    gen = torch.Generator().manual_seed(4)
    first = generate_groups(model, tok, probs, 3, 9, generator=gen, record=True)
    train = first.select(torch.tensor([0, 2, 5]))  # holds the record too
    second = generate_groups(model, tok, probs, 3, 9, generator=gen, record=True)
    assert storage(second) != storage(first)  # the first record is alive: fresh buffers
    kept = storage(first)
    del first
    third = generate_groups(model, tok, probs, 3, 9, generator=gen, record=True)
    assert storage(third) != kept  # `train` still holds the first record
    del train
    fourth = generate_groups(model, tok, probs, 3, 9, generator=gen, record=True)
    assert storage(fourth) == kept  # now its pages are handed out again
    assert storage(second) != storage(third)


def test_a_graph_built_on_a_record_keeps_its_buffers_from_being_recycled(model, tok):
    """The log-prob graph of a whole record holds views of its buffers: they must not be handed
    to a later decode before that graph is gone, even when every Rollouts holding the record is
    (writes under inference mode would not be caught by autograd's version check)."""
    import copy

    m = copy.deepcopy(model)
    eos = torch.tensor(rollout._eos_ids(m, tok))
    m.get_output_embeddings().register_forward_hook(  # no row finishes: one bucket, in order
        lambda mod, inp, out: out.index_fill(-1, eos, -1e4)
    )
    probs = _problems(["7=", "12+3="])
    gen = torch.Generator().manual_seed(6)
    r = generate_groups(m, tok, probs, 3, 9, generator=gen, record=True)
    assert r.recorded.gather(torch.arange(len(r)), 8) is r.recorded.sources[0]  # the buffers
    plain = Rollouts(**{**r.__dict__, "recorded": None})
    weights = torch.linspace(-1, 1, r.response_ids.numel()).view(r.response_ids.shape)
    lp = response_logprobs(m, r)
    del r
    for seed in (7, 8):  # later records of the same shape
        generate_groups(m, tok, probs, 3, 9, generator=gen.manual_seed(seed), record=True)
    (lp * weights).sum().backward()
    got = [p.grad.clone() for p in m.parameters()]
    _, want = _logprobs_and_grads(m, plain)
    for x, y in zip(got, want, strict=True):
        assert torch.allclose(x, y, atol=1e-5, rtol=1e-4)
