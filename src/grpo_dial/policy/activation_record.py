"""Recorded projection outputs: the sampler's activations reused by the log-prob forward.

A decode (`lean_llama.decode_logits` with a `recorder` as its `project`) can write every
projection's output (q, k, v, o, gate, up, down of every layer) at each forwarded response
position, until rows start leaving its batch. The log-prob forward of the same rows, while the
weights are unchanged (`weights_stamp`), then takes those outputs instead of recomputing
y = x W^T + b (`known_projector` as `lean_llama.forward`'s `project`), with the linear's own
backward (dx = dy W, dW = dy^T x, db = sum dy) on the recomputed inputs x. The values are the
sampler's: they equal the forward's up to float rounding.

The record's CPU buffers come from a small pool (`BufferPool`): see there for why and how much.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import torch
from torch import Tensor

from grpo_dial.policy import lean_llama
from grpo_dial.policy.lean_llama import Project

PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
Outputs = list[dict[str, Tensor]]  # per layer: projection name -> (N, W, out)


def can_record(model: torch.nn.Module) -> bool:
    """True when the decode can record projection outputs for reuse: `lean_llama.applies`,
    float32 weights, every projection exactly torch.nn.Linear and every MLP exactly LlamaMLP,
    all without hooks (the reusing forward bypasses them)."""
    if not lean_llama.applies(model):
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
    buffers (on the CPU) go back to the pool."""


SPARE_SETS = 2  # record buffer sets kept per shape: a training loop alternates between two


class BufferPool:
    """Record buffer sets handed back when their lease is collected, handed out again for the
    same (device, rows, width, projection widths).

    Why: a record is large and written once per sampling call. Fresh CPU memory costs a page
    fault per 4 KiB on its first write, which takes longer than the writes themselves; a
    recycled set keeps its pages mapped. CUDA's caching allocator already recycles device
    memory, so only CPU sets are pooled. Bound: at most `spare_sets` idle sets per shape, and
    shapes are never evicted, so the pool holds at most that many sets of each shape the process
    has recorded (a training run records one or a few: rows per sampling call x
    (max_new_tokens - 1)). Sets in use are held by their records, not by the pool; a set comes
    back only once every `Recorded` and every autograd graph holding its `Lease` is gone, so
    outputs still in use are never overwritten."""

    def __init__(self, spare_sets: int = SPARE_SETS):
        self.spare_sets = spare_sets
        self._spare: dict[tuple, list[Outputs]] = {}

    def take(self, key: tuple) -> Outputs | None:
        """An idle set of this shape, or None."""
        spare = self._spare.get(key)
        return spare.pop() if spare else None

    def give_back(self, key: tuple, buffers: Outputs) -> None:
        spare = self._spare.setdefault(key, [])
        if len(spare) < self.spare_sets:
            spare.append(buffers)


_POOL = BufferPool()  # process-wide: records outlive the step that made them


def record_buffers(model: torch.nn.Module, rows: int, width: int, device) -> tuple[Outputs, Lease]:
    """(uninitialized (rows, width, out) float32 buffers per layer and projection, their lease).

    Stored position-major (a transposed (width, rows, out) tensor: each decode step's matmul
    writes one contiguous block) except BATCH_MAJOR (written row by row). On the CPU a set whose
    lease was collected is handed out again for the same shape (`BufferPool`)."""
    key = (str(torch.device(device)), rows, width, _widths(model))

    def buffer(name: str, out: int) -> Tensor:
        if name in BATCH_MAJOR:
            return torch.empty((rows, width, out), device=device)
        return torch.empty((width, rows, out), device=device).transpose(0, 1)

    buffers = _POOL.take(key)
    if buffers is None:
        buffers = [
            {name: buffer(name, _projection(layer, name).out_features) for name in PROJECTIONS}
            for layer in model.model.layers
        ]
    lease = Lease()
    if torch.device(device).type == "cpu":
        weakref.finalize(lease, _POOL.give_back, key, buffers)
    return buffers, lease


def recorder(buffers: Outputs, column: int) -> Project:
    """A `project` for `lean_llama.decode_logits` (every buffer row decoding) that also writes
    each output (N, 1, out) into buffers[i][name][:, column]: position-major buffers take the
    matmul's output directly."""

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


def known_projector(known: Outputs, holds: tuple) -> Project:
    """A `project` for `lean_llama.forward` that returns the known outputs (B, T, out) per
    layer and name (`Recorded.gather`) with the linear's gradient; holds: their record's
    leases, kept alive by the graph."""

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
