"""Tests for grpo_dial.data.prompting: chat-template and plain prompt ids, and their use in
rollouts.
"""

from __future__ import annotations

import string

import pytest
import torch

from grpo_dial.data.prompting import encode_prompts, has_chat_template
from grpo_dial.data.tasks.base import Problem
from grpo_dial.policy.model import PolicySpec, build_char_tokenizer, build_tiny_llama
from grpo_dial.policy.rollout import generate_groups

ALPHABET = string.ascii_letters + string.digits + " +=:\n|"
TEMPLATE = (
    "{% for m in messages %}|{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}|assistant: {% endif %}"
)
TEXTS = ["7+5=", "What is 12 + 30", ""]


def char_tokenizer(template: str | None = None):
    tok = build_char_tokenizer(ALPHABET)
    tok.chat_template = template
    return tok


def char_ids(tok, text: str) -> list[int]:
    return [tok.convert_tokens_to_ids(c) for c in text]


def test_plain_tokenizer_gets_bos_plus_text():
    tok = char_tokenizer()
    assert not has_chat_template(tok)
    bos = tok.bos_token_id
    assert encode_prompts(tok, TEXTS) == [[bos, *char_ids(tok, t)] for t in TEXTS]
    assert encode_prompts(tok, ["<bos>7="]) == [[bos, *char_ids(tok, "7=")]]  # bos not doubled
    assert encode_prompts(tok, []) == []


def test_plain_tokenizer_without_bos():
    tok = char_tokenizer()
    tok.bos_token = None
    assert tok.bos_token_id is None
    assert encode_prompts(tok, ["7="]) == [char_ids(tok, "7=")]


def test_chat_template_renders_one_user_turn():
    tok = char_tokenizer(TEMPLATE)
    assert has_chat_template(tok)
    got = encode_prompts(tok, TEXTS)
    assert got == [char_ids(tok, f"|user: {t}\n|assistant: ") for t in TEXTS]


def test_chat_template_that_writes_bos_is_not_doubled():
    tok = char_tokenizer("{{ bos_token }}" + TEMPLATE)
    got = encode_prompts(tok, ["7="])
    assert got == [[tok.bos_token_id, *char_ids(tok, "|user: 7=\n|assistant: ")]]


@pytest.mark.parametrize("template", [None, TEMPLATE])
def test_rollouts_use_the_encoding(template):
    tok = char_tokenizer(template)
    spec = PolicySpec(n_layers=1, hidden_size=32, n_heads=2, intermediate_size=64)
    model = build_tiny_llama(spec, tok, seed=0)
    problems = [Problem(f"p{i}", t, "0", "d") for i, t in enumerate(TEXTS[:2])]
    ro = generate_groups(model, tok, problems, 2, 3, generator=torch.Generator().manual_seed(0))
    expected = encode_prompts(tok, TEXTS[:2])
    for i in range(len(ro)):
        ids = ro.prompt_ids[i][ro.prompt_mask[i].bool()].tolist()
        assert ids == expected[i // 2]
