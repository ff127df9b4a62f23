"""Group sampling with a KV cache, against Hugging Face's generate and a plain uncached loop."""

from __future__ import annotations

import math

import pytest
import torch
from _rollout_fixtures import (
    PROMPTS,
    make_problems,
    real_tokens,
    sample_groups,
    tiny_model,
    tiny_tokenizer,
)

from grpo_dial.policy.rollout import decode_texts, generate_groups, response_logprobs, sample


@pytest.fixture(scope="module")
def tok():
    return tiny_tokenizer()


@pytest.fixture(scope="module")
def model(tok):
    return tiny_model(tok)


def test_greedy_equals_hf_generate(model, tok):
    r = sample_groups(model, tok, g=1, max_new=10, temperature=0.0)
    batch = tok(PROMPTS, padding=True, return_tensors="pt")  # bos + text, left-padded
    assert torch.equal(batch["input_ids"], r.prompt_ids)
    model.eval()
    # the sampler never draws pad, bos or unk (sample.banned_ids): HF's own suppression
    out = model.generate(
        **batch, do_sample=False, max_new_tokens=10, suppress_tokens=SPECIAL_NOT_EOS
    )
    hf = out[:, batch["input_ids"].shape[1] :]
    t = r.response_ids.shape[1]
    assert torch.equal(r.response_ids, hf[:, :t])
    # greedy is the temperature -> 0 limit of sampling
    cold = sample_groups(model, tok, g=1, max_new=10, temperature=1e-4, seed=9)
    assert torch.equal(cold.response_ids, r.response_ids)


SPECIAL_NOT_EOS = [0, 1, 3]  # <pad>, <bos>, <unk> of the character tokenizer (<eos> is 2)


def test_same_generator_seed_same_rollouts(model, tok):
    a, b, c = (sample_groups(model, tok, seed=s) for s in (5, 5, 6))
    for field in ("prompt_ids", "response_ids", "response_mask", "finished", "group_ids"):
        assert torch.equal(getattr(a, field), getattr(b, field))
    assert a.texts == b.texts
    assert not torch.equal(a.response_ids[:, :2], c.response_ids[:, :2])


def test_groups_masks_and_finished_with_early_stops(model, tok):
    # an untrained model emits <eos> with probability ~1/19 per step: some rows stop, some not
    g, max_new = 4, 20
    r = sample_groups(model, tok, g=g, max_new=max_new, seed=2)
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
            tok.decode(real_tokens(r.prompt_ids[i], r.prompt_mask[i]))
            == "<bos>" + (PROMPTS[i // g])
        )


def test_loop_stops_when_all_finished(model, tok):
    r = sample_groups(model, tok, problems=make_problems(["5="]), g=6, max_new=300, seed=3)
    assert r.finished.all()
    assert r.response_ids.shape[1] == int(r.response_lengths.max()) < 300


def test_singleton_groups(model, tok):
    r = sample_groups(model, tok, g=1, max_new=5)
    assert torch.equal(r.group_ids, torch.arange(3))
    assert r.response_ids.shape[0] == 3


def test_per_problem_group_sizes_are_problem_major(model, tok):
    r = sample_groups(model, tok, g=[2, 1, 3], max_new=6, seed=4)
    assert r.group_ids.tolist() == [0, 0, 1, 2, 2, 2]
    assert [p.prompt_id for p in r.problems] == ["p0", "p0", "p1", "p2", "p2", "p2"]
    uniform = sample_groups(model, tok, g=[4, 4, 4], max_new=6, seed=5)
    same = sample_groups(model, tok, g=4, max_new=6, seed=5)
    assert uniform.texts == same.texts and torch.equal(uniform.group_ids, same.group_ids)


def test_prompt_texts_override_and_model_mode_restored(model, tok):
    model.train()
    r = generate_groups(
        model,
        tok,
        make_problems()[:2],
        1,
        3,
        prompt_texts=["1=", "2="],
        generator=torch.Generator().manual_seed(0),
    )
    assert model.training
    model.eval()
    assert tok.decode(real_tokens(r.prompt_ids[1], r.prompt_mask[1])) == "<bos>2="


def test_bad_arguments(model, tok):
    with pytest.raises(ValueError, match="group_size"):
        generate_groups(model, tok, make_problems(), 0, 5)
    with pytest.raises(ValueError, match="group_size"):
        generate_groups(model, tok, make_problems(), [2, 0, 1], 5)
    with pytest.raises(ValueError, match="3 problems"):
        generate_groups(model, tok, make_problems(), [2, 2], 5)
    with pytest.raises(ValueError, match="max_new_tokens"):
        generate_groups(model, tok, make_problems(), 2, 0)
    with pytest.raises(ValueError, match="temperature"):
        generate_groups(model, tok, make_problems(), 2, 5, temperature=-1.0)
    with pytest.raises(ValueError, match="prompt_texts"):
        generate_groups(model, tok, make_problems(), 2, 5, prompt_texts=["1="])
    with pytest.raises(ValueError, match="at least one problem"):
        generate_groups(model, tok, [], 2, 5)
    with pytest.raises(ValueError, match="generation_batch"):
        generate_groups(model, tok, make_problems(), 2, 5, generation_batch=0)


# --------------------------------------------------------------------------- fast paths


def _reference_sampling(model, tok, texts, g, max_new, seed):
    """The plain loop: no cache, every row in every step, torch.multinomial on all N rows of
    the softmax without pad, bos and unk."""
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
            logits[:, SPECIAL_NOT_EOS] = -math.inf
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
    monkeypatch.setattr(sample, "COMPACT_AT", compact_at)
    model.eval()
    r = sample_groups(model, tok, g=5, max_new=25, seed=11)
    ref, ref_finished = _reference_sampling(model, tok, PROMPTS, 5, 25, seed=11)
    assert 0 < r.finished.sum() < len(r)  # rows really finish early
    assert torch.equal(r.finished, ref_finished)
    assert torch.equal(r.response_ids, ref[:, : r.response_ids.shape[1]])


def test_generation_batch_layout_and_reproducibility(model, tok):
    whole = sample_groups(model, tok, g=[3, 2, 4], max_new=10, seed=7)
    gen = torch.Generator().manual_seed(7)
    big = generate_groups(
        model, tok, make_problems(), [3, 2, 4], 10, generator=gen, generation_batch=9
    )
    assert big.texts == whole.texts  # one call of all rows is the default
    runs = []
    for _ in range(2):
        gen = torch.Generator().manual_seed(7)
        runs.append(
            generate_groups(model, tok, make_problems(), [3, 2, 4], 10, generator=gen,
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
            seq = real_tokens(a.prompt_ids[i], a.prompt_mask[i])
            for t, o in enumerate(real_tokens(a.response_ids[i], a.response_mask[i])):
                logits = model(torch.tensor([seq]), use_cache=False).logits[0, -1]
                assert abs(lp[i, t].item() - torch.log_softmax(logits, -1)[o].item()) < 1e-5
                seq.append(o)


def test_fast_text_decoding_equals_batch_decode(tok):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

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


@pytest.mark.parametrize("lean", [True, False])
def test_alive_check_interval_does_not_change_the_rollouts(model, tok, monkeypatch, lean):
    """The host reads how many rows are alive only every k tokens; tokens, masks, finished
    flags and texts are the same for every k (lean decode and the generic forward)."""
    from grpo_dial.policy import lean_llama

    if not lean:
        monkeypatch.setattr(lean_llama, "applies", lambda m: False)
    problems = make_problems()
    runs = []
    for k in (1, 3, 8, 1000):
        gen = torch.Generator().manual_seed(5)
        runs.append(generate_groups(model, tok, problems, 5, 25, 1.0, gen, check_every=k))
    first = runs[0]
    assert 0 < first.finished.sum() < len(first)  # rows end at different tokens
    for r in runs[1:]:
        assert torch.equal(r.response_ids, first.response_ids)
        assert torch.equal(r.response_mask, first.response_mask)
        assert torch.equal(r.finished, first.finished) and r.texts == first.texts
    with pytest.raises(ValueError, match="check_every must be an integer >= 1"):
        generate_groups(model, tok, problems, 2, 5, check_every=0)


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_nonfinite_logits_stop_sampling_with_one_line(model, tok, bad):
    import copy

    broken = copy.deepcopy(model)
    with torch.no_grad():
        broken.lm_head.weight[3] = bad  # token 3's logit is NaN (or +-inf) for every input
    with pytest.raises(ValueError, match="logits are NaN or inf") as caught:
        sample_groups(broken, tok, g=2, max_new=6, seed=0)
    assert "\n" not in str(caught.value)


# --------------------------------------------------------------------------- special tokens


def _special_heavy(model, boost: float):
    """The tiny model with `boost` added to the logits of pad, bos and unk everywhere (lm_head
    given a bias), so that unmasked they would take most draws."""
    import copy

    heavy = copy.deepcopy(model)
    head = torch.nn.Linear(*heavy.lm_head.weight.shape[::-1], bias=True)
    with torch.no_grad():
        head.weight.copy_(heavy.lm_head.weight)
        head.bias.zero_()
        head.bias[SPECIAL_NOT_EOS] = boost
    heavy.lm_head = head
    return heavy


@pytest.mark.parametrize("temperature", [1.0, 0.0])
def test_pad_bos_and_unk_are_never_sampled(model, tok, temperature):
    assert sample.banned_ids(tok, [tok.eos_token_id]) == SPECIAL_NOT_EOS
    heavy = _special_heavy(model, 3.0)
    heavy.eval()
    # unmasked, the specials would take most draws: their share of the next-token mass
    with torch.no_grad():
        enc = tok(PROMPTS, padding=True, return_tensors="pt")
        probs = torch.softmax(heavy(**enc).logits[:, -1], -1)
    assert probs[:, SPECIAL_NOT_EOS].sum(-1).min() > 0.5
    problems = make_problems(PROMPTS * 10)
    gen = torch.Generator().manual_seed(13)
    r = generate_groups(heavy, tok, problems, 16, 40, temperature=temperature, generator=gen)
    drawn = r.response_ids[r.response_mask.bool()]  # (tokens,) every sampled token
    assert drawn.numel() > 2000
    assert not torch.isin(drawn, torch.tensor(SPECIAL_NOT_EOS)).any()
    assert all(not any(s in t for s in ("<pad>", "<bos>", "<unk>")) for t in r.texts)
    if temperature:
        assert 0 < r.finished.sum() < len(r)  # eos is still drawn: responses end


def test_a_pad_that_is_eos_still_ends_responses():
    class Tok:
        pad_token_id, bos_token_id, unk_token_id = 7, 5, None

    assert sample.banned_ids(Tok(), [7, 9]) == [5]  # pad falls back to eos: kept
    Tok.bos_token_id = None
    assert sample.banned_ids(Tok(), [7]) == []
