"""Recorded projection outputs: reused log-probs and gradients equal the recomputed ones; a
record is used only with its weights, and its pooled buffers only once no record holds them."""

from __future__ import annotations

import math

import pytest
import torch
from _rollout_fixtures import SMALL, gqa_llama, make_problems, tiny_model, tiny_tokenizer

from grpo_dial.policy import activation_record, lean_llama
from grpo_dial.policy.rollout import (
    Rollouts,
    concat,
    eos_ids,
    generate_groups,
    response_logprobs,
    sample,
)


@pytest.fixture(scope="module")
def tok():
    return tiny_tokenizer()


@pytest.fixture(scope="module")
def model(tok):
    return tiny_model(tok)


def _count_reuse(monkeypatch) -> list[int]:
    """Counts the forwards that took recorded projection outputs."""
    calls = []
    original = activation_record.known_projector

    def spy(known, holds):
        calls.append(1)
        return original(known, holds)

    monkeypatch.setattr(activation_record, "known_projector", spy)
    return calls


def _nan_buffers(monkeypatch):
    """Record buffers start as NaN: any position read but never written poisons the result."""
    original = activation_record.record_buffers

    def poisoned(*args):
        buffers, lease = original(*args)
        for layer in buffers:
            for b in layer.values():
                b.fill_(math.nan)
        return buffers, lease

    monkeypatch.setattr(activation_record, "record_buffers", poisoned)


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
    m = model if which == "mha" else gqa_llama(tok)  # gqa: biases in every projection
    monkeypatch.setattr(sample, "COMPACT_AT", 2.0)  # rows never leave the decode batch
    probs = make_problems(["7=", "12+3=", "7=", "99*9-14="])
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
    monkeypatch.setattr(sample, "COMPACT_AT", 0.01)  # every finished row leaves at once
    probs = make_problems(["7=", "12+3=", "99*9-14=", "5="])
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
    buffers, _ = activation_record.record_buffers(model, 3, 4, "cpu")
    for layer in buffers:
        for b in layer.values():
            b.copy_(torch.arange(3.0)[:, None, None].expand_as(b))  # row r holds r
    stamp = activation_record.weights_stamp(model)
    rec = activation_record.Recorded.of(buffers, stamp, torch.tensor([4, 4, 2]))
    assert rec.gather(torch.arange(3), 4) is None  # row 2 wrote only positions 0, 1
    part = rec.gather(torch.tensor([2, 0]), 2)
    assert part is not buffers and part[1]["down_proj"][:, :, 0].tolist() == [[2, 2], [0, 0]]
    sub = rec.take(torch.tensor([1, 0]))
    assert sub.gather(torch.tensor([1]), 4)[0]["q_proj"].eq(0).all()  # take composes rows
    whole = activation_record.Recorded.of(buffers, stamp, torch.full((3,), 4))
    assert whole.gather(torch.arange(3), 4) is buffers  # all rows in order, all valid: no copy
    two = activation_record.Recorded.concat([whole, rec.take(torch.tensor([2, 0]))])  # 3 + 2 rows
    assert len(two.sources) == 2 and two.valid.tolist() == [4, 4, 4, 4, 4, 2]
    assert two.gather(torch.arange(5), 4) is None  # rollout row 3 is recorded row 2: 2 valid
    got = two.gather(torch.tensor([4, 1, 3]), 2)[0]["o_proj"][:, :, 0]
    assert got.tolist() == [[0, 0], [1, 1], [2, 2]]  # rows from both sources, in request order


def test_a_record_is_used_only_with_the_weights_it_was_made_with(model, tok, monkeypatch):
    import copy

    monkeypatch.setattr(sample, "COMPACT_AT", 2.0)  # every position recorded

    m = copy.deepcopy(model)
    gen = torch.Generator().manual_seed(3)
    r = generate_groups(m, tok, make_problems(), 3, 12, generator=gen, record=True)
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
    monkeypatch.setattr(sample, "COMPACT_AT", 2.0)  # every position recorded
    gen = torch.Generator().manual_seed(8)
    a = generate_groups(
        model, tok, make_problems(["7=", "12+3="]), 3, 6, generator=gen, record=True
    )
    b = generate_groups(model, tok, make_problems(["99*9-14="]), 2, 14, generator=gen, record=True)
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

    assert activation_record.can_record(model)
    hooked = gqa_llama(tok)
    handle = hooked.model.layers[0].mlp.up_proj.register_forward_hook(lambda m, i, o: o)
    # a hook on a projection: the reusing forward would bypass it
    assert lean_llama.applies(hooked) and not activation_record.can_record(hooked)
    gen = torch.Generator().manual_seed(0)
    sampled = generate_groups(hooked, tok, make_problems(), 2, 5, generator=gen, record=True)
    assert sampled.recorded is None
    handle.remove()
    assert activation_record.can_record(hooked)
    qwen = Qwen2ForCausalLM(
        Qwen2Config(vocab_size=len(tok), hidden_size=32, intermediate_size=48,
                    num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2)
    )  # fmt: skip
    assert not activation_record.can_record(qwen)
    sampled = generate_groups(qwen, tok, make_problems(), 2, 5, generator=gen, record=True)
    assert sampled.recorded is None
    spec = SMALL
    per_token = spec.n_layers * (5 * spec.hidden_size + 2 * spec.intermediate_size)
    assert activation_record.recorded_bytes(model, 10, 7) == 4 * 10 * 7 * per_token


def test_record_buffers_are_reused_only_once_no_record_holds_them(model, tok):
    def storage(rollouts):
        return rollouts.recorded.sources[0][0]["up_proj"].data_ptr()

    probs = make_problems(["7=", "12+3="])
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
    eos = torch.tensor(eos_ids(m, tok))
    m.get_output_embeddings().register_forward_hook(  # no row finishes: one bucket, in order
        lambda mod, inp, out: out.index_fill(-1, eos, -1e4)
    )
    probs = make_problems(["7=", "12+3="])
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
