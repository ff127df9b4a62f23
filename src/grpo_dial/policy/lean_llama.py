"""A lean forward of transformers' LlamaForCausalLM for sampling and log-probs (same numbers).

The generic `model(...)` call spends much of a small model's time outside arithmetic: output
wrappers, the 4D mask built from the 2D one, the cache object growing by concatenation. This
module runs the same layers through their own modules, and
- attention as two batched matmuls around a float32 softmax, grouped-query heads as a view of
  the queries (sdpa's CPU kernel is slower on these small shapes, forward and backward),
- RMS norms with mean(x * x) instead of x.pow(2).mean() (same values; pow's backward is slow),
- decoding on preallocated key/value buffers written in place (`decode_logits`),
- an explicit boolean mask: query i attends key j iff j is a real token at or before i (every
  query also attends itself, so padded queries stay finite).
(Concatenating q/k/v or gate/up into one matmul does not pay on CPU: the strided halves make
the elementwise ops and the backward slower than the matmul saves.)

Projection reuse (`can_record`, `Recorded`): a decode can write every projection's output
(q, k, v, o, gate, up, down of every layer) at each forwarded response position, until rows
start leaving its batch; the log-prob forward of the same rows, while the weights are unchanged,
then takes those outputs instead of recomputing x W^T + b, with the linear's own backward
(dx = dy W, dW = dy^T x, db = sum dy) on the recomputed inputs x. The values are the sampler's:
they equal the forward's up to float rounding.

It applies only where it is the same computation (`applies`): exactly LlamaForCausalLM
(every Llama-architecture checkpoint, SmolLM2 included) with sdpa attention, no attention
dropout and no hooks on the modules it bypasses (the model, decoder, layers, attentions, RMS
norms); the modules it calls (embedding, rotary embedding, projections, MLPs, output head) run
with their own hooks.
Other models return None and keep the generic forward.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

KV = tuple[Tensor, Tensor]
PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
Outputs = list[dict[str, Tensor]]  # per layer: projection name -> (N, W, out)
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
    backward ~4x faster on CPU (pow's backward is a slow broadcast)."""
    dtype = x.dtype
    x = x.to(torch.float32)
    x = x * torch.rsqrt((x * x).mean(-1, keepdim=True) + norm.variance_epsilon)
    return norm.weight * x.to(dtype)


def _rope(x: Tensor, cos: Tensor, sin_signed: Tensor) -> Tensor:
    """x cos + rotate_half(x) sin on (B, T, heads, hd) with cos (B, T, 1, hd) and sin_signed =
    (-sin[:hd/2], sin[hd/2:]): transformers' apply_rotary_pos_emb in the projections' own
    layout, rotate_half(x) sin written as roll(x, hd/2) sin_signed (the same products)."""
    return torch.addcmul(x * cos, x.roll(x.shape[-1] // 2, -1), sin_signed)


def _attend(q: Tensor, keys: Tensor, values: Tensor, blocked: Tensor | None, scale: float):
    """softmax(q k^T scale, masked) v as (B, T, H hd), from q (B, T, H, hd) and keys / values
    (B, H_kv, S, hd); query head h uses key head h // (H / H_kv) (grouped-query attention);
    blocked (B, 1, 1, T, S) bool (True = masked) or None."""
    b, t, h, d = q.shape
    g, s = keys.shape[1], keys.shape[2]
    q = q.transpose(1, 2).reshape(b, g, (h // g) * t, d)  # (B, H_kv, rep T, hd), head-major
    scores = torch.matmul(q, keys.transpose(-1, -2)) * scale  # (B, H_kv, rep T, S)
    if blocked is not None:
        scores = scores.view(b, g, h // g, t, s).masked_fill(blocked, -math.inf).view(scores.shape)
    weights = torch.softmax(scores, -1, dtype=torch.float32).to(values.dtype)
    out = torch.matmul(weights, values)  # (B, H_kv, rep T, hd)
    return out.view(b, h, t, d).transpose(1, 2).reshape(b, t, h * d)


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
    module, x) -> the projection's output (default: module(x))."""
    inner = model.model
    b, t = h.shape[:2]
    cos, sin = rotary  # (B, T, hd)
    half = sin.shape[-1] // 2
    cos, sin = cos[:, :, None], torch.cat((-sin[..., :half], sin[..., half:]), -1)[:, :, None]
    blocked = None if mask is None else ~mask[:, :, None]  # (B, 1, 1, T, S)
    for i, layer in enumerate(inner.layers):
        attn = layer.self_attn
        x = _rms_norm(layer.input_layernorm, h)
        shape = (b, t, -1, attn.head_dim)
        q = _rope(project(i, "q_proj", attn.q_proj, x).view(shape), cos, sin)  # (B, T, H, hd)
        k = _rope(project(i, "k_proj", attn.k_proj, x).view(shape), cos, sin).transpose(1, 2)
        v = project(i, "v_proj", attn.v_proj, x).view(shape).transpose(1, 2)  # (B, H_kv, T, hd)
        keys, values = kv_of(i, k, v)
        o = _attend(q, keys, values, blocked, attn.scaling)  # (B, T, H hd)
        h = h + project(i, "o_proj", attn.o_proj, o)
        x = _rms_norm(layer.post_attention_layernorm, h)
        if project is compute_projection:
            h = h + layer.mlp(x)
        else:  # LlamaMLP's forward: down(act(gate(x)) * up(x))
            mlp = layer.mlp
            gate = mlp.act_fn(project(i, "gate_proj", mlp.gate_proj, x))
            h = h + project(
                i, "down_proj", mlp.down_proj, gate * project(i, "up_proj", mlp.up_proj, x)
            )
    return _rms_norm(inner.norm, h)


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
    `rotary_table` (None: the rotary embedding module per call); project: e.g. `recorder`."""

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
    keep_last: bool = False, known: Outputs | None = None, holds: tuple = (),
) -> tuple[Tensor, list[KV]]:  # fmt: skip
    """(logits (B, T, V) or (B, 1, V) with keep_last, this segment's keys/values per layer).

    ids, pos (B, T); key_mask (B, S) over past + these tokens (1 = real), S = past length + T;
    past: per layer (keys, values) (B, H_kv, S - T, hd) from an earlier segment (e.g. the
    prompt, repeated over its responses); known: these tokens' projection outputs (B, T, out)
    per layer and name, recorded with the current weights (`Recorded.gather`), used instead of
    the projections' matmuls; holds: their record's leases, kept by the graph. Differentiable."""
    own: list[KV] = []

    def kv_of(i: int, k: Tensor, v: Tensor) -> KV:
        own.append((k, v))
        if past is None:
            return k, v
        return torch.cat([past[i][0], k], 2), torch.cat([past[i][1], v], 2)

    mask = attend_mask(key_mask, ids.shape[1])
    h = model.model.embed_tokens(ids)  # (B, T, D)
    project = compute_projection if known is None else _known_projector(known, holds)
    h = _layers(model, h, model.model.rotary_emb(h, pos), mask, kv_of, project)
    return model.lm_head(h[:, -1:] if keep_last else h), own


# --------------------------------------------------------------------------- projection reuse


def can_record(model: torch.nn.Module) -> bool:
    """True when the decode can record projection outputs for reuse: `applies`, float32
    weights, every projection exactly torch.nn.Linear and every MLP exactly LlamaMLP, all without
    hooks (the reusing forward bypasses them)."""
    if not applies(model):
        return False
    from transformers.models.llama.modeling_llama import LlamaMLP

    for layer in model.model.layers:
        if (
            type(layer.mlp) is not LlamaMLP
            or layer.mlp._forward_hooks
            or layer.mlp._forward_pre_hooks
        ):
            return False
        for name in PROJECTIONS:
            m = _projection(layer, name)
            if type(m) is not torch.nn.Linear or m._forward_hooks or m._forward_pre_hooks:
                return False
            if m.weight.dtype != torch.float32:
                return False
    return True


def _projection(layer, name: str) -> torch.nn.Module:
    return getattr(
        layer.mlp if name in ("gate_proj", "up_proj", "down_proj") else layer.self_attn, name
    )


def _widths(model: torch.nn.Module) -> tuple[int, ...]:
    """out_features of every projection, layer by layer in PROJECTIONS order."""
    layers = model.model.layers
    return tuple(_projection(layer, name).out_features for layer in layers for name in PROJECTIONS)


def recorded_bytes(model: torch.nn.Module, rows: int, width: int) -> int:
    """Bytes of the projection outputs of `rows` rows x `width` positions (float32)."""
    return 4 * rows * width * sum(_widths(model))


def weights_stamp(model: torch.nn.Module) -> tuple:
    """Identifies the model and its parameters' current values: the model's id and every
    parameter's (id, in-place version counter). An optimizer step changes it."""
    return (id(model), tuple((id(p), p._version) for p in model.parameters()))


# Stored batch-major: their product is down_proj's input, which its backward flattens (a
# position-major product would be copied there); the other outputs are read only by elementwise
# ops, reshapes and the residual sum, which take either layout.
BATCH_MAJOR = ("gate_proj", "up_proj")


class Lease:
    """Held by every `Recorded` made from one set of record buffers; when the last is gone the
    buffers (on the CPU) go back to a small pool."""


SPARE_SETS = 2  # record buffer sets kept per shape: a training loop alternates between two
_spare: dict[tuple, list[Outputs]] = {}


def record_buffers(model: torch.nn.Module, rows: int, width: int, device) -> tuple[Outputs, Lease]:
    """(uninitialized (rows, width, out) float32 buffers per layer and projection, their lease).

    Stored position-major (a transposed (width, rows, out) tensor: each decode step's matmul
    writes one contiguous block) except BATCH_MAJOR (written row by row). On the CPU a set whose
    lease was collected is handed out again for the same shape: its pages stay mapped, where
    fresh memory would cost a page fault per 4 KiB written (more than the writes themselves).
    CUDA's caching allocator recycles memory on its own."""
    key = (str(torch.device(device)), rows, width, _widths(model))
    spare = _spare.get(key)

    def buffer(name: str, out: int) -> Tensor:
        if name in BATCH_MAJOR:
            return torch.empty((rows, width, out), device=device)
        return torch.empty((width, rows, out), device=device).transpose(0, 1)

    buffers = spare.pop() if spare else [
        {name: buffer(name, _projection(layer, name).out_features) for name in PROJECTIONS}
        for layer in model.model.layers
    ]  # fmt: skip
    lease = Lease()
    if torch.device(device).type == "cpu":
        weakref.finalize(lease, _give_back, key, buffers)
    return buffers, lease


def _give_back(key: tuple, buffers: Outputs) -> None:
    spare = _spare.setdefault(key, [])
    if len(spare) < SPARE_SETS:
        spare.append(buffers)


def recorder(buffers: Outputs, column: int) -> Project:
    """A `project` for `decode_logits` (every buffer row decoding) that also writes each output
    (N, 1, out) into buffers[i][name][:, column]: position-major buffers take the matmul's
    output directly."""

    def project(i: int, name: str, module: torch.nn.Module, x: Tensor) -> Tensor:
        target = buffers[i][name][:, column]  # (N, out)
        if not target.is_contiguous():
            y = module(x)  # (N, 1, out)
            target.copy_(y[:, 0])
            return y
        x2 = x.reshape(-1, x.shape[-1])  # (N, in)
        if module.bias is None:
            torch.mm(x2, module.weight.t(), out=target)
        else:
            torch.addmm(module.bias, x2, module.weight.t(), out=target)
        return target.view(x.shape[0], 1, -1)

    return project


class _KnownLinear(torch.autograd.Function):
    """y = x W^T + b where y is already known (recorded with these weights): the forward returns
    y, the backward is the linear's: dx = dy W, dW = dy^T x, db = sum dy."""

    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, bias: Tensor | None, y: Tensor, holds: tuple):
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        ctx.holds = holds  # the record's leases: its buffers are not recycled under this graph
        return y.view_as(y)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, dy: Tensor):
        x, weight = ctx.saved_tensors
        dy2 = dy.reshape(-1, dy.shape[-1])  # (B T, out)
        dx = dw = db = None
        if ctx.needs_input_grad[0]:
            dx = (dy2 @ weight).view(x.shape)
        if ctx.needs_input_grad[1]:
            dw = dy2.t() @ x.reshape(-1, x.shape[-1])
        if ctx.has_bias and ctx.needs_input_grad[2]:
            db = dy2.sum(0)
        return dx, dw, db, None, None


def _known_projector(known: Outputs, holds: tuple) -> Project:
    def project(i: int, name: str, module: torch.nn.Module, x: Tensor) -> Tensor:
        return _KnownLinear.apply(x, module.weight, module.bias, known[i][name], holds)

    return project


@dataclass
class Recorded:
    """Projection outputs one or more decodes recorded, for the log-prob forward of the same rows.

    sources[s][i][name] (N_s, W_s, out) (`record_buffers`' layouts): one decode's outputs; the
    recorded rows are the sources' rows one after the other (source s starts at starts[s]), and
    [r, t] is the output of forwarding token t of recorded row r, written for t < valid[r] (a
    decode records until rows start leaving its batch); rows: the recorded row of each rollout
    row (N,); stamp: `weights_stamp` when recorded: the outputs are used only while it holds."""

    sources: list[Outputs]
    starts: Tensor  # (S,) long
    rows: Tensor  # (N,) long
    stamp: tuple
    valid: Tensor  # (N_rec,) long
    leases: tuple = ()  # of the sources' buffers (`record_buffers`)

    @classmethod
    def of(cls, outputs: Outputs, stamp: tuple, valid: Tensor, lease: Lease | None = None):
        """The record of one decode, rollout row r = recorded row r."""
        zero = torch.zeros(1, dtype=torch.long, device=valid.device)
        rows = torch.arange(len(valid), device=valid.device)
        return cls([outputs], zero, rows, stamp, valid, () if lease is None else (lease,))

    @classmethod
    def concat(cls, records: list[Recorded]) -> Recorded:
        """One record whose rollout rows are each record's in turn (no copy); same stamp."""
        sizes = torch.tensor([len(r.valid) for r in records])
        first = (torch.cumsum(sizes, 0) - sizes).tolist()  # each record's first recorded row
        return cls(
            [src for r in records for src in r.sources],
            torch.cat([r.starts + f for r, f in zip(records, first, strict=True)]),
            torch.cat([r.rows + f for r, f in zip(records, first, strict=True)]),
            records[0].stamp,
            torch.cat([r.valid for r in records]),
            tuple(lease for r in records for lease in r.leases),
        )

    def take(self, rows: Tensor) -> Recorded:
        """The same record for rollout rows `rows` (N',) (no copy)."""
        picked = self.rows[rows.to(self.rows.device)]
        return Recorded(self.sources, self.starts, picked, self.stamp, self.valid, self.leases)

    def valid_for(self, model: torch.nn.Module) -> bool:
        return self.stamp == weights_stamp(model)

    def gather(self, rows: Tensor, width: int) -> Outputs | None:
        """Outputs (B, width, out) of rollout rows `rows` (B,): a single source itself when
        `rows` are all its rows in order at its full width, else contiguous copies; None when
        some row has fewer than `width` positions written."""
        src = self.rows[rows.to(self.rows.device)]
        if bool((self.valid[src] < width).any()):
            return None
        if len(self.sources) == 1:
            outputs = self.sources[0]
            first = outputs[0][PROJECTIONS[0]] if outputs else None
            whole = (
                first is not None
                and width == first.shape[1]
                and len(src) == first.shape[0]
                and bool((src == torch.arange(len(src), device=src.device)).all())
            )
            if whole:
                return outputs
            return [{name: y[src, :width] for name, y in layer.items()} for layer in outputs]
        source = torch.searchsorted(self.starts, src, right=True) - 1  # (B,)
        local = src - self.starts[source]  # (B,) row within its source
        picks = [(s, (source == s).nonzero().squeeze(1)) for s in range(len(self.sources))]
        picks = [(s, at, local[at]) for s, at in picks if len(at)]
        gathered = []
        for i, layer in enumerate(self.sources[0]):
            part = {}
            for name, y0 in layer.items():
                out = y0.new_empty((len(src), width, y0.shape[2]))
                for s, at, row in picks:
                    out[at] = self.sources[s][i][name][row, :width]
                part[name] = out
            gathered.append(part)
        return gathered
