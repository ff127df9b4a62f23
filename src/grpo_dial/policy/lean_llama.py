"""A lean forward of transformers' LlamaForCausalLM for sampling and log-probs (same numbers).

The generic `model(...)` call spends much of a small model's time outside arithmetic: output
wrappers, the 4D mask built from the 2D one, the cache object growing by concatenation. This
module runs the same layers through their own modules, and
- attention as two batched matmuls around a float32 softmax, grouped-query heads as a view of
  the queries (sdpa's CPU kernel is slower on these small shapes, forward and backward); on
  CUDA the fused scaled_dot_product_attention, which keeps no (B, H, T, S) weights,
- keys and values cached in the compute dtype (bf16 under autocast: what the matmuls read),
- gradient checkpointing where the model has it on (`checkpointing`): each layer under
  torch.utils.checkpoint, as the model's own forward does,
- RMS norms with mean(x * x) instead of x.pow(2).mean() (same values; pow's backward is slow),
- decoding on preallocated key/value buffers written in place (`decode_logits`),
- an explicit boolean mask: query i attends key j iff j is a real token at or before i (every
  query also attends itself, so padded queries stay finite).
(Concatenating q/k/v or gate/up into one matmul does not pay on CPU: the strided halves make
the elementwise ops and the backward slower than the matmul saves.)

Both `forward` and `decode_logits` compute every projection through a `project` hook (default:
the module itself); `activation_record` uses it to record the sampler's projection outputs and to
reuse them in the log-prob forward.

It applies only where it is the same computation (`applies`): exactly LlamaForCausalLM
(every Llama-architecture checkpoint, SmolLM2 included) with sdpa attention, no attention
dropout and no hooks on the modules it bypasses (the model, decoder, layers, attentions, RMS
norms); the modules it calls (embedding, rotary embedding, projections, MLPs, output head) run
with their own hooks.
Other models (`applies` false) keep the generic forward.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.utils.checkpoint
from torch import Tensor

KV = tuple[Tensor, Tensor]
Project = Callable[[int, str, torch.nn.Module, Tensor], Tensor]  # (layer, name, module, x) -> y


def applies(model: torch.nn.Module) -> bool:
    """True when the lean forward is the same computation as `model(...)` (module docstring)."""
    try:
        from transformers.models.llama import modeling_llama as ml
    except ImportError:  # pragma: no cover - another transformers layout
        return False
    if type(model) is not ml.LlamaForCausalLM:
        return False
    config, inner = model.config, model.model
    layers = list(inner.layers)
    if (
        config._attn_implementation not in ("sdpa", "eager")
        or config.attention_dropout != 0
        or len(layers) != config.num_hidden_layers
        or not layers
    ):
        return False
    kinds = {ml.LlamaForCausalLM, ml.LlamaModel, ml.LlamaDecoderLayer, ml.LlamaAttention}
    kinds.add(ml.LlamaRMSNorm)
    bypassed = [model, inner, inner.norm, *layers]
    for layer in layers:
        bypassed += [layer.self_attn, layer.input_layernorm, layer.post_attention_layernorm]
    return not any(
        type(m) not in kinds or m._forward_hooks or m._forward_pre_hooks for m in bypassed
    )


def _rms_norm(norm: torch.nn.Module, x: Tensor) -> Tensor:
    """LlamaRMSNorm's forward with mean(x * x) for x.pow(2).mean(): the same values, and a
    faster backward on CPU (pow's backward is a slow broadcast)."""
    dtype = x.dtype
    x = x.to(torch.float32)
    x = x * torch.rsqrt((x * x).mean(-1, keepdim=True) + norm.variance_epsilon)
    return norm.weight * x.to(dtype)


def _rope(x: Tensor, cos: Tensor, sin_signed: Tensor) -> Tensor:
    """x cos + rotate_half(x) sin on (B, T, heads, hd) with cos (B, T, 1, hd) and sin_signed =
    (-sin[:hd/2], sin[hd/2:]): transformers' apply_rotary_pos_emb in the projections' own
    layout, rotate_half(x) sin written as roll(x, hd/2) sin_signed (the same products)."""
    return torch.addcmul(x * cos, x.roll(x.shape[-1] // 2, -1), sin_signed)


SDPA_DEVICES = ("cuda",)  # where F.scaled_dot_product_attention replaces the two matmuls


def _attend(q: Tensor, keys: Tensor, values: Tensor, mask, blocked, scale: float) -> Tensor:
    """softmax(q k^T scale, masked) v as (B, T, H hd), from q (B, T, H, hd) and keys / values
    (B, H_kv, S, hd); query head h uses key head h // (H / H_kv) (grouped-query attention);
    mask (B, 1, T, S) bool (True = attend) or None, blocked = ~mask (B, 1, 1, T, S). On
    SDPA_DEVICES one fused
    scaled_dot_product_attention (no (B, H, T, S) weights kept for backward), elsewhere two
    batched matmuls around a float32 softmax."""
    b, t, h, d = q.shape
    g, s = keys.shape[1], keys.shape[2]
    if q.device.type in SDPA_DEVICES:
        out = torch.nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2), keys, values, attn_mask=mask, scale=scale, enable_gqa=g != h
        )  # (B, H, T, hd)
        return out.transpose(1, 2).reshape(b, t, h * d)
    q = q.transpose(1, 2).reshape(b, g, (h // g) * t, d)  # (B, H_kv, rep T, hd), head-major
    scores = torch.matmul(q, keys.transpose(-1, -2)) * scale  # (B, H_kv, rep T, S)
    if blocked is not None:
        scores = scores.view(b, g, h // g, t, s).masked_fill(blocked, -math.inf).view(scores.shape)
    weights = torch.softmax(scores, -1, dtype=torch.float32).to(values.dtype)
    out = torch.matmul(weights, values)  # (B, H_kv, rep T, hd)
    return out.view(b, h, t, d).transpose(1, 2).reshape(b, t, h * d)


def kv_dtype(x: Tensor) -> torch.dtype:
    """The dtype keys and values are cached in: autocast's compute dtype where autocast is on
    (what every attention matmul casts them to anyway), else x's."""
    kind = x.device.type
    return torch.get_autocast_dtype(kind) if torch.is_autocast_enabled(kind) else x.dtype


def checkpointing(model) -> bool:
    """Whether the model's own forward would checkpoint its layers now (any model): a module
    has gradient_checkpointing on, the model is in train mode and autograd records."""
    return (
        model.training
        and torch.is_grad_enabled()
        and any(getattr(m, "gradient_checkpointing", False) is True for m in model.modules())
    )


def compute_projection(_i: int, _name: str, module: torch.nn.Module, x: Tensor) -> Tensor:
    """The default `project`: module(x)."""
    return module(x)


def _layers(
    model, h: Tensor, rotary: KV, mask: Tensor | None, kv_of, project: Project = compute_projection
) -> Tensor:
    """Hidden states (B, T, D) after every decoder layer and the final norm.

    rotary: (cos, sin) (B, T, hd) at the tokens' positions; mask (B, 1, T, S) bool (True =
    attend) or None; kv_of(i, k, v) -> (keys, values) (B, H_kv, S, hd) attended by layer i's
    queries, from this segment's rotated keys and values (B, H_kv, T, hd); project(i, name,
    module, x) -> the projection's output (default: module(x)). Where the model checkpoints
    (`checkpointing`), each layer runs under torch.utils.checkpoint (non-reentrant), as the
    model's own forward would: its activations are recomputed in backward, not kept."""
    cos, sin = rotary  # (B, T, hd)
    half = sin.shape[-1] // 2
    cos, sin = cos[:, :, None], torch.cat((-sin[..., :half], sin[..., half:]), -1)[:, :, None]
    blocked = None if mask is None else ~mask[:, :, None]  # (B, 1, 1, T, S)
    recompute = checkpointing(model)
    for i, layer in enumerate(model.model.layers):
        args = (i, layer, h, cos, sin, (mask, blocked), kv_of, project)
        if recompute:
            h = torch.utils.checkpoint.checkpoint(_layer, *args, use_reentrant=False)
        else:
            h = _layer(*args)
    return _rms_norm(model.model.norm, h)


def _layer(i: int, layer, h: Tensor, cos, sin, masks, kv_of, project: Project) -> Tensor:
    """Decoder layer i on h (B, T, D): attention then MLP, each added to the residual; masks:
    (mask, blocked) of `_attend`."""
    attn = layer.self_attn
    x = _rms_norm(layer.input_layernorm, h)
    shape = (*h.shape[:2], -1, attn.head_dim)
    q = _rope(project(i, "q_proj", attn.q_proj, x).view(shape), cos, sin)  # (B, T, H, hd)
    k = _rope(project(i, "k_proj", attn.k_proj, x).view(shape), cos, sin).transpose(1, 2)
    v = project(i, "v_proj", attn.v_proj, x).view(shape).transpose(1, 2)  # (B, H_kv, T, hd)
    keys, values = kv_of(i, k, v)
    o = _attend(q, keys, values, *masks, attn.scaling)  # (B, T, H hd)
    h = h + project(i, "o_proj", attn.o_proj, o)
    x = _rms_norm(layer.post_attention_layernorm, h)
    if project is compute_projection:
        return h + layer.mlp(x)
    mlp = layer.mlp  # LlamaMLP's forward: down(act(gate(x)) * up(x))
    gate = mlp.act_fn(project(i, "gate_proj", mlp.gate_proj, x))
    return h + project(i, "down_proj", mlp.down_proj, gate * project(i, "up_proj", mlp.up_proj, x))


def rotary_table(model, length: int) -> KV | None:
    """(cos, sin) (length, hd) of positions 0..length-1 for `decode_logits`, or None where the
    rotary embedding depends on the sequence length (dynamic / longrope: computed per step)."""
    rope = model.model.rotary_emb
    kind = str(getattr(rope, "rope_type", "default"))
    if "dynamic" in kind or "longrope" in kind:
        return None
    w = model.model.embed_tokens.weight
    pos = torch.arange(length, device=w.device)[None]  # (1, length)
    cos, sin = rope(w[:1, None], pos)  # (1, length, hd)
    return cos[0], sin[0]


def decode_logits(
    model, tok: Tensor, pos: Tensor, keys: list[Tensor], values: list[Tensor], slot: int,
    mask: Tensor | None, table: KV | None = None, project: Project = compute_projection,
) -> Tensor:  # fmt: skip
    """Logits (R, V) of one new token per row. tok (R,), pos (R, 1); keys / values per layer
    (R, H_kv, S, hd) preallocated: this token's are written at `slot` and the query attends
    :slot + 1; mask (R, 1, 1, slot + 1) bool (True = attend) or None (attend all); table:
    `rotary_table` (None: the rotary embedding module per call); project: e.g.
    `activation_record.recorder`."""

    def kv_of(i: int, k: Tensor, v: Tensor) -> KV:
        keys[i][:, :, slot : slot + 1] = k
        values[i][:, :, slot : slot + 1] = v
        return keys[i][:, :, : slot + 1], values[i][:, :, : slot + 1]

    h = model.model.embed_tokens(tok[:, None])  # (R, 1, D)
    rotary = model.model.rotary_emb(h, pos) if table is None else (table[0][pos], table[1][pos])
    return model.lm_head(_layers(model, h, rotary, mask, kv_of, project))[:, -1]  # (R, V)


def attend_mask(key_mask: Tensor, t: int) -> Tensor:
    """(B, 1, T, S) bool for the last T of S = key_mask.shape[1] positions as queries: query i
    attends key j iff j <= i and key_mask[j], or j = i."""
    s = key_mask.shape[1]
    j = torch.arange(s, device=key_mask.device)
    i = torch.arange(s - t, s, device=key_mask.device)[:, None]  # (T, 1)
    causal = j[None, :] <= i  # (T, S)
    return ((causal & key_mask.bool()[:, None, :]) | (j[None, :] == i))[:, None]


def forward(
    model, ids: Tensor, pos: Tensor, key_mask: Tensor, past: list[KV] | None = None,
    keep_last: bool = False, project: Project = compute_projection,
) -> tuple[Tensor, list[KV]]:  # fmt: skip
    """(logits (B, T, V) or (B, 1, V) with keep_last, this segment's keys/values per layer).

    ids, pos (B, T); key_mask (B, S) over past + these tokens (1 = real), S = past length + T;
    past: per layer (keys, values) (B, H_kv, S - T, hd) from an earlier segment (e.g. the
    prompt, repeated over its responses); project: each projection's output (default: the
    module's; `activation_record.known_projector`: outputs recorded with the current weights,
    without the projections' matmuls). Differentiable."""
    own: list[KV] = []

    def kv_of(i: int, k: Tensor, v: Tensor) -> KV:
        own.append((k, v))
        if past is None:
            return k, v
        return torch.cat([past[i][0], k], 2), torch.cat([past[i][1], v], 2)

    mask = attend_mask(key_mask, ids.shape[1])
    h = model.model.embed_tokens(ids)  # (B, T, D)
    h = _layers(model, h, model.model.rotary_emb(h, pos), mask, kv_of, project)
    return model.lm_head(h[:, -1:] if keep_last else h), own
