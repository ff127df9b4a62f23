"""Shared cases of the sampling and log-prob tests: a tiny Llama, its character tokenizer,
prompts of different lengths (left padding matters), and a GQA Llama with biases."""

from __future__ import annotations

import torch

from grpo_dial.data.tasks.base import Problem
from grpo_dial.policy.model import PolicySpec, build_char_tokenizer, build_tiny_llama
from grpo_dial.policy.rollout import generate_groups

SMALL = PolicySpec(n_layers=2, hidden_size=32, n_heads=2, intermediate_size=64)
PROMPTS = ["7=", "12+3=", "99*9-14="]  # different lengths: left padding matters


def tiny_tokenizer():
    return build_char_tokenizer("0123456789+-*=;")


def tiny_model(tok):
    return build_tiny_llama(SMALL, tok, seed=0)


def make_problems(texts=PROMPTS):
    return [Problem(f"p{i}", t, "0", "d") for i, t in enumerate(texts)]


def sample_groups(model, tok, problems=None, g=4, max_new=12, seed=0, temperature=1.0):
    gen = torch.Generator().manual_seed(seed)
    return generate_groups(
        model, tok, problems or make_problems(), g, max_new, temperature=temperature, generator=gen
    )


def real_tokens(ids, mask):
    return ids[mask.bool()].tolist()


def gqa_llama(tok, attn="sdpa"):
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
