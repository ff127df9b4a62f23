"""Group sampling with a KV cache and response log-probs, against uncached one-token references."""

from __future__ import annotations

import pytest
import torch

from grpo_dial.policy import PolicySpec, build_char_tokenizer, build_tiny_llama
from grpo_dial.rollout import Rollouts, concat, generate_groups, response_logprobs
from grpo_dial.tasks.base import Problem

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
