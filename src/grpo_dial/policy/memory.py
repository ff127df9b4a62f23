"""Peak memory of the update and of the sampler, predicted from the model's shape.

Counted, not fitted: the bytes each op of the lean forward (`lean_llama`) keeps for backward,
per token and layer, with D hidden, A = H hd query width, K = H_kv hd key width, I the MLP
width, V the vocabulary, S = prompt + response keys a response token attends:

  fp32:  24 D + 16 A + 8 K + 16 I          (3 RMS-norm tensors x 2 norms, q raw / rolled /
                                            heads, k raw / rolled, o, 4 MLP tensors)
  bf16:  34 D + 8 A + 4 K + 8 I            (autocast: fp32 residual and norms, a bf16 copy of
                                            each projection's input, bf16 projections)
  plus per row and layer: keys and values b S K (8 B fp32, 4 B bf16), attention weights
  b H T S (4 B fp32; 6 B bf16: the fp32 softmax and its bf16 copy; 0 with the fused SDPA of
  CUDA, which keeps its output instead), once per forward the final norm, rotary tables and
  the mask, and the larger of two moments of the backward: its start, 16 B per response token
  x V (the fp32 logits kept for the log-softmax, the gradients into them through the gather
  and the log-sum-exp, and their sum), or the output head's end, 4 B per logit and the V x D
  gradients of head and embedding (12 V D tied: both and their sum; 8 V D untied). Which one
  wins depends on tokens per bucket against D (CPU profiles: at SmolLM2's widths the V x D
  end dominates small buckets).
  bf16 also keeps a bf16 copy of the weights while a bucket's graph lives (2 B per parameter).

A bucket of b rows of one prompt length P and response length T forwards its U distinct
prompts once (U P tokens, S = P) and its responses on their cache (b (T - 1) tokens, S = P + T
- 1). With gradient checkpointing only each layer's input (4 D per token) is kept, plus one
layer's activations while it is recomputed. The update's peak adds the fp32 weights, their
gradients and AdamW's two moments (16 B per parameter; SGD 8 B) to the largest bucket.

The sampler's peak: the weights (4 B per parameter), the key/value cache of one decode call
(rows x (P + max_new_tokens - 1) x 2 K x layers, in the compute dtype), and the larger of the
prefill's temporaries (its own keys and values, one layer's attention scores and MLP) and a
decode step's four fp32 rows x V tensors (logits, probabilities, the Exp(1) noise of
torch.multinomial's draw, their ratio) with one layer's temporaries.

The model is checked against measured peaks (tests/policy/test_memory.py, docs/performance.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

GIB = 2**30


@dataclass(frozen=True)
class Shape:
    """What memory depends on: layers, hidden D, heads H, key/value heads, head width, MLP
    width I, vocabulary V and the parameter count."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    params: int
    tied: bool = True  # output head = embedding (one V x D parameter)

    @classmethod
    def of(cls, config) -> Shape:
        """From a transformers config (Llama, Qwen2, SmolLM2, ...); the parameter count of a
        Llama-type model with that config (tied or not)."""
        d, h = config.hidden_size, config.num_attention_heads
        kv = getattr(config, "num_key_value_heads", None) or h
        hd = getattr(config, "head_dim", None) or d // h
        i, v, n = config.intermediate_size, config.vocab_size, config.num_hidden_layers
        per_layer = d * (h * hd) * 2 + d * (kv * hd) * 2 + 3 * d * i + 2 * d
        tied = getattr(config, "tie_word_embeddings", False)
        params = n * per_layer + v * d * (1 if tied else 2) + d
        return cls(n, d, h, kv, hd, i, v, params, bool(tied))


def _per_token(shape: Shape, precision: str, fused: bool) -> float:
    """Bytes one forwarded token keeps per layer (module docstring), attention weights aside."""
    d, i = shape.hidden, shape.intermediate
    a, k = shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
    if precision == "fp32":
        per = 24 * d + 16 * a + 8 * k + 16 * i
        return per + (4 * a if fused else 0)  # fused: its output kept, no copy of the heads
    return 34 * d + 8 * a + 4 * k + 8 * i + (2 * a if fused else 0)


def _segment(shape, rows, tokens, keys, precision, fused) -> float:
    """Bytes a forward of rows x tokens queries over `keys` keys keeps, all layers."""
    kv_bytes = 8 if precision == "fp32" else 4
    attn = 0 if fused else (4 if precision == "fp32" else 6)
    per_layer = (
        rows * tokens * _per_token(shape, precision, fused)
        + rows * keys * shape.kv_heads * shape.head_dim * kv_bytes
        + rows * shape.heads * tokens * keys * attn
    )
    # once per forward: the final norm (and its bf16 copy), rotary cos / sin, the bool mask
    once = rows * tokens * ((12 if precision == "fp32" else 14) * shape.hidden
                            + 8 * shape.head_dim + keys)  # fmt: skip
    return shape.layers * per_layer + once


def bucket_bytes(
    shape: Shape,
    rows: int,
    prompt_len: int,
    response_len: int,
    precision: str = "fp32",
    unique_prompts: int | None = None,
    checkpointing: bool = False,
    fused: bool = False,
) -> float:
    """Peak bytes of one bucket's forward + backward above weights, gradients and optimizer:
    rows responses of response_len tokens after prompts of prompt_len (unique_prompts distinct
    ones, default rows), `precision` "fp32" or "bf16" (autocast), fused = CUDA's SDPA."""
    _check(precision)
    u = rows if unique_prompts is None else unique_prompts
    t = max(response_len - 1, 0)
    s = prompt_len + t
    prompt = _segment(shape, u, prompt_len, prompt_len, precision, fused)
    response = _segment(shape, rows, t, s, precision, fused)
    if checkpointing:  # each layer's input kept; one layer's activations while recomputed
        kept = 4 * shape.hidden * (u * prompt_len + rows * t) * shape.layers
        prompt, response = kept, (prompt + response) / shape.layers
    n_v = rows * response_len * shape.vocab  # logits
    head = (12 if shape.tied else 8) * shape.vocab * shape.hidden
    late = max(16 * n_v, 4 * n_v + head)  # backward's start or its output-head / embedding end
    weights = 2 * shape.params if precision == "bf16" else 0
    return prompt + response + late + weights


def update_bytes(
    shape: Shape,
    rows: int,
    prompt_len: int,
    response_len: int,
    micro_batch: int | None = None,
    precision: str = "fp32",
    group_size: int = 1,
    optimizer: str = "adamw",
    checkpointing: bool = False,
    fused: bool = False,
) -> dict[str, float]:
    """{'static', 'bucket', 'peak'} bytes of one update of `rows` rows (all of the longest
    lengths: the bound), backward per bucket of at most micro_batch rows (None: all; below 1 is
    refused); static = fp32 weights + gradients + optimizer moments."""
    _check_rows("micro_batch", micro_batch)
    b = rows if micro_batch is None else min(micro_batch, rows)
    u = max(1, math.ceil(b / max(group_size, 1)))
    bucket = bucket_bytes(shape, b, prompt_len, response_len, precision, u, checkpointing, fused)
    static = shape.params * (16 if optimizer == "adamw" else 8)
    return {"static": static, "bucket": bucket, "peak": static + bucket}


def sampler_bytes(
    shape: Shape,
    rows: int,
    prompt_len: int,
    max_new_tokens: int,
    generation_batch: int | None = None,
    precision: str = "fp32",
    group_size: int = 1,
) -> dict[str, float]:
    """{'static', 'cache', 'step', 'peak'} bytes of sampling `rows` responses in decode calls
    of generation_batch rows: fp32 weights, one call's key/value cache and its larger one-off
    (prefill temporaries or the per-step rows x V tensors); generation_batch below 1 is refused."""
    _check(precision)
    _check_rows("generation_batch", generation_batch)
    r = rows if generation_batch is None else min(generation_batch, rows)
    u = max(1, math.ceil(r / max(group_size, 1)))
    kv = 4 if precision == "fp32" else 2
    width = prompt_len + max_new_tokens - 1
    k = shape.kv_heads * shape.head_dim
    cache = shape.layers * r * width * 2 * k * kv
    own = shape.layers * u * prompt_len * k * (8 if precision == "fp32" else 6)  # prefill's k, v
    prefill = own + u * prompt_len * (shape.heads * prompt_len * 8 + 3 * shape.intermediate * 4)
    # logits, probabilities, noise, their ratio; the prompts' logits; one layer's temporaries
    step = (4 * r + u) * shape.vocab * 4 + r * (3 * shape.intermediate + 4 * shape.hidden) * 4
    static = 4 * shape.params
    top = max(prefill, step)
    return {"static": static, "cache": cache, "step": top, "peak": static + cache + top}


# Shapes of the configs' base models (no download needed to plan): SmolLM2-135M(-Instruct),
# Qwen2.5-Math-1.5B (from their config.json).
KNOWN = {
    "smollm2": Shape(30, 576, 9, 3, 64, 1536, 49152, 134_515_008, True),
    "Qwen/Qwen2.5-Math-1.5B": Shape(28, 1536, 12, 2, 128, 8960, 151936, 1_543_714_304, True),
}


def shape_of(base: str) -> Shape:
    """The Shape of a config's model.base: a KNOWN name (bare or as hub:<id>), or a directory with
    a config.json."""
    from grpo_dial.data.sources import hub_model_id

    name = hub_model_id(base) or base
    if name in KNOWN:
        return KNOWN[name]
    from pathlib import Path

    if (Path(base) / "config.json").exists():
        from transformers import AutoConfig

        return Shape.of(AutoConfig.from_pretrained(base))
    raise ValueError(
        f"model.base {base!r}: shape unknown; use a local model directory or one of "
        f"{', '.join(KNOWN)} (bare or as hub:<id>)"
    )


def plan_config(config: dict, prompt_len: int = 256) -> dict[str, dict[str, float]]:
    """Predicted peaks of a workflow config (YAML merged on the default): the update of one
    step (prompts_per_step x group_size rows of max_new_tokens), the training sampler and the
    pass-rate sampler; on CUDA the fused attention. prompt_len: the longest prompt, in tokens."""
    model, train, rates = config["model"], config["train"], config["pass_rates"]
    shape = shape_of(model["base"])
    fused = str(model.get("device", "cpu")).startswith("cuda")
    g = train["group_size"]
    rows = train["prompts_per_step"] * g
    update = update_bytes(
        shape, rows, prompt_len, train["max_new_tokens"], train.get("micro_batch"),
        train.get("precision", "fp32"), g, train.get("optimizer", "adamw"),
        train.get("gradient_checkpointing", False), fused,
    )  # fmt: skip
    sampler = sampler_bytes(
        shape, rows, prompt_len, train["max_new_tokens"], train.get("generation_batch"),
        train.get("precision", "fp32"), g,
    )  # fmt: skip
    n_rates = rates["prompts_per_batch"] * rates["samples"]
    passrates = sampler_bytes(
        shape, n_rates, prompt_len, rates["max_new_tokens"], None,
        train.get("precision", "fp32"), rates["samples"],
    )  # fmt: skip
    return {"update": update, "sampler": sampler, "passrate sampler": passrates}


def _check_rows(name: str, rows: int | None) -> None:
    if rows is not None and (isinstance(rows, bool) or not isinstance(rows, int) or rows < 1):
        raise ValueError(f"{name}={rows!r} is not valid; give a whole number of rows >= 1 or None")


def _check(precision: str) -> None:
    if precision not in ("fp32", "bf16"):
        raise ValueError(f"precision={precision!r} is not valid; choose one of fp32, bf16")


def gib(x: float) -> str:
    return f"{x / GIB:.2f} GiB"
