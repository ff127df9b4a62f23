"""The lean Llama forward against the model's own forward: decode logits, log-probs, gradients."""

from __future__ import annotations

import pytest
import torch
from _rollout_fixtures import (
    PROMPTS,
    gqa_llama,
    make_problems,
    sample_groups,
    tiny_model,
    tiny_tokenizer,
)

from grpo_dial.policy import lean_llama
from grpo_dial.policy.rollout import generate_groups, response_logprobs, sample


@pytest.fixture(scope="module")
def tok():
    return tiny_tokenizer()


@pytest.fixture(scope="module")
def model(tok):
    return tiny_model(tok)


def _record_logits(monkeypatch, lean: bool):
    """Run generation with (lean) or without the lean step; return the logits of every step."""
    seen = []
    draw = sample._next_tokens

    def spy(logits, *args):
        seen.append(logits.detach().clone())
        return draw(logits, *args)

    monkeypatch.setattr(sample, "_next_tokens", spy)
    if not lean:
        monkeypatch.setattr(lean_llama, "applies", lambda model: False)
    return seen


@pytest.mark.parametrize("which", ["mha", "gqa"])
@pytest.mark.parametrize("texts", [PROMPTS, ["12+3=", "45+6=", "78-9="]])  # padded, unpadded
def test_lean_decode_equals_the_generic_forward(model, tok, monkeypatch, which, texts):
    m = model if which == "mha" else gqa_llama(tok)
    m.eval()
    assert lean_llama.applies(m)
    runs = []
    for lean in (True, False):
        seen = _record_logits(monkeypatch, lean)
        gen = torch.Generator().manual_seed(21)
        runs.append((generate_groups(m, tok, make_problems(texts), 5, 20, generator=gen), seen))
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
    assert applies(model) and applies(gqa_llama(tok, attn="eager"))  # the same math
    assert not applies(gqa_llama(tok, attn="flex_attention"))  # other attention kernels
    hooked = gqa_llama(tok)
    handle = hooked.model.layers[1].self_attn.register_forward_hook(lambda mod, inp, out: out)
    assert not applies(hooked)  # a hook on a bypassed module
    handle.remove()
    seen = []
    handle = hooked.model.layers[0].self_attn.k_proj.register_forward_hook(
        lambda mod, inp, out: seen.append(1)
    )
    assert applies(hooked)  # modules it calls keep their hooks
    generate_groups(hooked, tok, make_problems(), 2, 4, generator=torch.Generator().manual_seed(0))
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
    r = generate_groups(qwen, tok, make_problems(), 2, 6, generator=gen)
    assert r.response_ids.shape[0] == 6


@pytest.mark.parametrize("which", ["mha", "gqa"])
def test_lean_logprobs_and_gradients_equal_the_generic_forward(model, tok, monkeypatch, which):
    import copy

    m = model if which == "mha" else gqa_llama(tok)
    probs = make_problems(["7=", "12+3=", "7=", "99*9-14="])  # shared and left-padded prompts
    r = sample_groups(m, tok, problems=probs, g=[3, 2, 2, 3], max_new=16, seed=12)
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


def _saved_bytes_and_grads(m, r):
    """(bytes autograd saved outside checkpointed regions during the forward, logp, grads)."""
    saved = []

    def pack(t):
        saved.append(t.numel() * t.element_size())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        lp = response_logprobs(m, r, micro_batch=4)
    weights = torch.linspace(-1, 1, lp.numel()).view(lp.shape)
    (lp * weights).sum().backward()
    return sum(saved), lp.detach(), [p.grad for p in m.parameters()]


def test_gradient_checkpointing_is_honoured_by_the_lean_forward(tok):
    """With the model's gradient checkpointing on (train mode, dropout 0: load_policy's way),
    the lean forward checkpoints each layer: far fewer saved activations, same numbers."""
    import copy

    from grpo_dial.policy.model import enable_gradient_checkpointing

    m = gqa_llama(tok)
    r = sample_groups(m, tok, problems=make_problems(["7=", "12+3=", "99*9-14="]), g=3,
                      max_new=16, seed=4)  # fmt: skip
    plain = copy.deepcopy(m).eval()
    ckpt = copy.deepcopy(m)
    enable_gradient_checkpointing(ckpt)
    assert lean_llama.applies(ckpt) and lean_llama.checkpointing(ckpt)
    assert not lean_llama.checkpointing(plain)
    a_bytes, a, ga = _saved_bytes_and_grads(plain, r)
    b_bytes, b, gb = _saved_bytes_and_grads(ckpt, r)
    assert b_bytes < 0.5 * a_bytes, (a_bytes, b_bytes)
    assert torch.allclose(a, b, atol=1e-6, rtol=0)
    for x, y in zip(ga, gb, strict=True):
        assert torch.allclose(x, y, atol=1e-6, rtol=1e-5)


def test_fused_attention_path_equals_the_matmul_path(tok, monkeypatch):
    """The CUDA branch (scaled_dot_product_attention) run on the CPU: same log-probs,
    gradients and sampled tokens as the two matmuls (grouped-query heads, padded prompts)."""
    import copy

    m = gqa_llama(tok)
    probs = make_problems(["7=", "12+3=", "99*9-14="])
    r = sample_groups(m, tok, problems=probs, g=3, max_new=16, seed=4)
    runs = []
    for devices in (("cuda",), ("cuda", "cpu")):
        monkeypatch.setattr(lean_llama, "SDPA_DEVICES", devices)
        again = sample_groups(m, tok, problems=probs, g=3, max_new=16, seed=4)
        assert torch.equal(again.response_ids, r.response_ids)
        runs.append(_saved_bytes_and_grads(copy.deepcopy(m), r)[1:])
    (a, ga), (b, gb) = runs
    assert torch.allclose(a, b, atol=1e-5, rtol=0)
    for x, y in zip(ga, gb, strict=True):
        assert torch.allclose(x, y, atol=1e-5, rtol=1e-4)


def test_keys_are_cached_in_the_compute_dtype(model, tok, monkeypatch):
    seen = []
    decode = lean_llama.decode_logits

    def spy(m, tok_, pos, keys, values, *args):
        seen.append((keys[0].dtype, values[0].dtype))
        return decode(m, tok_, pos, keys, values, *args)

    monkeypatch.setattr(lean_llama, "decode_logits", spy)
    sample_groups(model, tok, g=2, max_new=4, seed=0)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        sample_groups(model, tok, g=2, max_new=4, seed=0)
    assert seen[0] == (torch.float32, torch.float32) and seen[-1] == (torch.bfloat16,) * 2
