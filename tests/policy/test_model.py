"""The char tokenizer and tiny Llama: exact round trips, seeded init, save/load like a hub model."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import AutoModelForCausalLM, AutoTokenizer

from grpo_dial.policy.model import (
    PolicySpec,
    build_char_tokenizer,
    build_tiny_llama,
    load_policy,
    save_policy,
)

ALPHABET = "0123456789+-*=; \n"
SMALL = PolicySpec(n_layers=2, hidden_size=32, n_heads=2, intermediate_size=64)


@pytest.fixture(scope="module")
def tok():
    return build_char_tokenizer(ALPHABET)


@settings(max_examples=80, deadline=None)
@given(st.text(alphabet=ALPHABET, max_size=40))
def test_round_trip_is_exact_one_token_per_character(tok, s):
    ids = tok(s, add_special_tokens=False)["input_ids"]
    assert len(ids) == len(s)
    assert tok.decode(ids) == s
    # token i is character i: the vocabulary maps back letter by letter
    assert [tok.convert_ids_to_tokens(i) for i in ids] == list(s)


def test_special_tokens_ids_and_padding(tok):
    assert [tok.pad_token_id, tok.bos_token_id, tok.eos_token_id, tok.unk_token_id] == [0, 1, 2, 3]
    assert len(tok) == 4 + len(set(ALPHABET))
    assert tok.padding_side == "left"
    assert tok("12")["input_ids"] == [1, *tok("12", add_special_tokens=False)["input_ids"]]
    assert tok("x7", add_special_tokens=False)["input_ids"][0] == tok.unk_token_id
    batch = tok(["1", "123"], add_special_tokens=False, padding=True)
    assert batch["input_ids"][0][:2] == [0, 0] and batch["attention_mask"][0] == [0, 0, 1]


def test_tokenizer_rejects_bad_alphabets():
    with pytest.raises(ValueError, match="non-empty"):
        build_char_tokenizer("")
    with pytest.raises(ValueError, match="<eos>"):
        build_char_tokenizer("ab<eos>")


def test_spec_validation():
    with pytest.raises(ValueError, match="divisible"):
        PolicySpec(hidden_size=30, n_heads=4)
    with pytest.raises(ValueError, match="n_layers"):
        PolicySpec(n_layers=0)
    with pytest.raises(ValueError, match="tie_word_embeddings"):
        PolicySpec(tie_word_embeddings=1)


def test_tiny_llama_config_and_seeded_init(tok):
    before = torch.random.get_rng_state()
    a = build_tiny_llama(SMALL, tok, seed=3)
    assert torch.equal(torch.random.get_rng_state(), before)  # global RNG untouched
    b = build_tiny_llama(SMALL, tok, seed=3)
    c = build_tiny_llama(SMALL, tok, seed=4)
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not all(torch.equal(sa[k], sc[k]) for k in sa)
    cfg = a.config
    assert cfg.vocab_size == len(tok) and cfg.num_hidden_layers == 2 and cfg.hidden_size == 32
    assert (cfg.bos_token_id, cfg.eos_token_id, cfg.pad_token_id) == (1, 2, 0)
    gen = a.generation_config
    assert (gen.bos_token_id, gen.eos_token_id, gen.pad_token_id) == (1, 2, 0)
    assert a.lm_head.weight.data_ptr() == a.model.embed_tokens.weight.data_ptr()  # tied


def test_save_pretrained_round_trip_same_logits(tok, tmp_path):
    model = build_tiny_llama(SMALL, tok, seed=0).eval()
    save_policy(model, tok, tmp_path / "policy")
    tok2 = AutoTokenizer.from_pretrained(tmp_path / "policy")
    model2 = AutoModelForCausalLM.from_pretrained(tmp_path / "policy").eval()
    texts = ["12+3=", "7=", "99*9-1=;"]
    assert [tok2.decode(tok2(t, add_special_tokens=False)["input_ids"]) for t in texts] == texts
    b1 = tok(texts, padding=True, return_tensors="pt")
    b2 = tok2(texts, padding=True, return_tensors="pt")
    assert torch.equal(b1["input_ids"], b2["input_ids"]) and tok2.padding_side == "left"
    with torch.no_grad():
        l1 = model(**b1).logits
        l2 = model2(**b2).logits
    assert torch.allclose(l1, l2, atol=1e-6)
    assert model2.generation_config.eos_token_id == tok.eos_token_id


def test_load_policy_defaults_dtype_and_errors(tok, tmp_path):
    save_policy(build_tiny_llama(SMALL, tok, seed=0), tok, tmp_path / "p")
    model, tok2 = load_policy(str(tmp_path / "p"))
    assert next(model.parameters()).dtype == torch.float32  # auto on CPU
    assert tok2.padding_side == "left" and tok2.pad_token_id == 0
    model16, _ = load_policy(str(tmp_path / "p"), dtype="bfloat16")
    assert next(model16.parameters()).dtype == torch.bfloat16
    with pytest.raises(ValueError, match="float32"):
        load_policy(str(tmp_path / "p"), dtype="fp16")
    with pytest.raises(ValueError, match="policy directory not found: .*deeper$"):
        load_policy(str(tmp_path / "missing" / "deeper"))
    with pytest.raises(ValueError, match="^policy path is empty"):  # not the working directory
        load_policy("")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="^policy directory .*empty has no loadable tokenizer"):
        load_policy(str(tmp_path / "empty"))


def test_load_policy_falls_back_to_eos_for_padding(tok, tmp_path):
    nopad = build_char_tokenizer(ALPHABET)
    nopad.pad_token = None
    nopad.padding_side = "right"
    save_policy(build_tiny_llama(SMALL, tok, seed=0), nopad, tmp_path / "p")
    _, loaded = load_policy(str(tmp_path / "p"))
    assert loaded.pad_token_id == loaded.eos_token_id == 2
    assert loaded.padding_side == "left"
