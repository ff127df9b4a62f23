"""Sampling groups of responses with a KV cache, and the log-probabilities of what was sampled.

For M problems and group size G the N = M G sequences are x_j = bos + prompt_j (left-padded to
width P), each repeated G times. Decoding draws o_t ~ softmax(logits_t / temperature) (argmax at
temperature 0) until the end-of-sequence token or `max_new_tokens`; position ids count only real
tokens, pos = cumsum(mask) - 1, so left padding never changes a sequence's distribution.
`response_logprobs` returns log pi(o_t | x, o_<t) at temperature 1 with the same masks and
positions, in differentiable forwards over concat(prompt, response).

Fast paths, each exact: a prompt is prefilled (and, for the log-probs, forwarded) once per group
and its cache repeated; finished rows leave the decode batch; log-prob forwards run on buckets of
similar length cut to their own width (`plan_buckets`), so padding is barely computed; Llama
models run both through `lean_llama` (the same numbers without the generic forward's overhead),
and a decode asked to `record` keeps its projection outputs for the log-prob forward of the same
weights (the same numbers to float rounding, without the projections' matmuls).

All randomness comes from the `generator` passed in: the same generator state, model, inputs and
generation_batch give the same rollouts (on the same device and thread count).
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from grpo_dial.data.tasks.base import Problem
from grpo_dial.policy import lean_llama


@dataclass
class Rollouts:
    """N sampled responses; row i answers `problems[i]`; rows of one group share `group_ids`."""

    problems: list[Problem]  # (N,)
    group_ids: Tensor  # (N,) long, 0..M-1: same problem in the same call
    prompt_ids: Tensor  # (N, P) left-padded, bos first
    prompt_mask: Tensor  # (N, P) 1 on real prompt tokens
    response_ids: Tensor  # (N, T) right-padded, EOS included when produced
    response_mask: Tensor  # (N, T) 1 on generated tokens up to and including EOS
    finished: Tensor  # (N,) bool, EOS produced within max_new_tokens
    texts: list[str]  # (N,) decoded responses without EOS or padding
    pad_token_id: int = 0  # fills padded positions when batches are concatenated
    recorded: lean_llama.Recorded | None = None  # the sampler's projection outputs (reuse)

    @property
    def response_lengths(self) -> Tensor:
        return self.response_mask.sum(1)  # (N,)

    def __len__(self) -> int:
        return len(self.problems)

    def select(self, rows: Tensor) -> Rollouts:
        """Rows `rows` (indices or a bool mask), group ids renumbered 0..M'-1 in sorted order."""
        rows = torch.as_tensor(rows, device=self.group_ids.device)
        if rows.dtype == torch.bool:
            rows = rows.nonzero().squeeze(1)  # (N',)
        idx = rows.tolist()
        _, gid = torch.unique(self.group_ids[rows], return_inverse=True)  # (N',)
        return Rollouts(
            problems=[self.problems[i] for i in idx],
            group_ids=gid,
            prompt_ids=self.prompt_ids[rows],
            prompt_mask=self.prompt_mask[rows],
            response_ids=self.response_ids[rows],
            response_mask=self.response_mask[rows],
            finished=self.finished[rows],
            texts=[self.texts[i] for i in idx],
            pad_token_id=self.pad_token_id,
            recorded=None if self.recorded is None else self.recorded.take(rows),
        )


def _pad_to(x: Tensor, width: int, value: int, left: bool) -> Tensor:
    extra = width - x.shape[1]
    return F.pad(x, (extra, 0) if left else (0, extra), value=value)


def concat(parts: list[Rollouts]) -> Rollouts:
    """One Rollouts from several (e.g. DAPO refill rounds): prompts re-padded on the left,
    responses on the right, group ids renumbered so part j's groups follow part j-1's."""
    if not parts:
        raise ValueError("concat needs at least one Rollouts")
    p_width = max(r.prompt_ids.shape[1] for r in parts)
    t_width = max(r.response_ids.shape[1] for r in parts)
    pad = parts[0].pad_token_id
    gids, offset = [], 0
    for r in parts:
        _, gid = torch.unique(r.group_ids, return_inverse=True)  # (N_j,) 0..M_j-1
        gids.append(gid + offset)
        offset += int(gid.max()) + 1 if gid.numel() else 0
    return Rollouts(
        problems=[p for r in parts for p in r.problems],
        group_ids=torch.cat(gids),
        prompt_ids=torch.cat([_pad_to(r.prompt_ids, p_width, pad, True) for r in parts]),
        prompt_mask=torch.cat([_pad_to(r.prompt_mask, p_width, 0, True) for r in parts]),
        response_ids=torch.cat([_pad_to(r.response_ids, t_width, pad, False) for r in parts]),
        response_mask=torch.cat([_pad_to(r.response_mask, t_width, 0, False) for r in parts]),
        finished=torch.cat([r.finished for r in parts]),
        texts=[t for r in parts for t in r.texts],
        pad_token_id=pad,
        recorded=_concat_recorded(parts),
    )


def _concat_recorded(parts: list[Rollouts]) -> lean_llama.Recorded | None:
    """The parts' records as one (no copy), or None unless every part has one of the same
    weights."""
    records = [r.recorded for r in parts]
    if any(rec is None or rec.stamp != records[0].stamp for rec in records):
        return None
    return records[0] if len(records) == 1 else lean_llama.Recorded.concat(records)


def _accepts(model: torch.nn.Module, name: str) -> bool:
    return name in inspect.signature(model.forward).parameters


def _cache_of(out) -> object:
    cache = getattr(out, "cache", None)
    return out.past_key_values if cache is None else cache


def _eos_ids(model: torch.nn.Module, tokenizer) -> list[int]:
    """Every id that ends a response: the tokenizer's eos and the generation config's (list)."""
    ids = {tokenizer.eos_token_id}
    gen = getattr(model, "generation_config", None)
    extra = getattr(gen, "eos_token_id", None) if gen is not None else None
    ids.update(extra if isinstance(extra, list | tuple) else [extra])
    ids.discard(None)
    if not ids:
        raise ValueError("the tokenizer has no eos token: responses could never finish")
    return sorted(int(i) for i in ids)


def _encode_prompts(tokenizer, texts: list[str]) -> list[list[int]]:
    """Prompt ids through the chat template if the tokenizer has one, else bos + text."""
    from grpo_dial.data.prompting import encode_prompts

    return encode_prompts(tokenizer, texts)


def generate_groups(
    model: torch.nn.Module,
    tokenizer,
    problems: list[Problem],
    group_size: int | Sequence[int],
    max_new_tokens: int,
    temperature: float = 1.0,
    generator: torch.Generator | None = None,
    prompt_texts: list[str] | None = None,
    generation_batch: int | None = None,
    record: bool = False,
) -> Rollouts:
    """G = group_size responses per problem, sampled with a KV cache.

    group_size is one G for every problem or one G_j >= 1 per problem (adaptive allocation); rows
    are problem-major: problem j's G_j samples are consecutive and share group id j (with one G,
    row i = j G + g is sample g of problem j). `prompt_texts` replaces the problems' prompt text
    (plain text: the tokenizer's chat template, if any, is applied here). Each decode call
    prefills every distinct prompt once and repeats its cache G_j times, then decodes one token
    per step; finished rows leave
    the batch (the cache rows are compacted); it stops when all rows are finished. temperature
    0 is greedy. `generation_batch` rows per decode call (None = all N) bound the memory; the
    calls run in row order. Random draws use only `generator` (None: torch's global RNG), which
    must live on the model's device: each step draws Exp(1) noise for all the call's rows, as
    torch.multinomial does, so dropping finished rows never changes the live rows' tokens, and
    with generation_batch None the stream equals torch.multinomial's. A different
    generation_batch gives other (equally distributed) samples from the same generator state.
    record: keep every projection's output at each forwarded response position
    (`Rollouts.recorded`, where `lean_llama.can_record(model)`), so that `response_logprobs`
    with unchanged weights skips the projections' matmuls; costs their size in memory
    (`lean_llama.recorded_bytes`).
    """
    if not problems:
        raise ValueError("generate_groups needs at least one problem")
    counts = _group_counts(group_size, len(problems))  # (M,) long
    if (
        isinstance(max_new_tokens, bool)
        or not isinstance(max_new_tokens, int)
        or max_new_tokens < 1
    ):
        raise ValueError(f"max_new_tokens must be an integer >= 1, got {max_new_tokens!r}")
    if not temperature >= 0:
        raise ValueError(f"temperature must be >= 0 (0 = greedy), got {temperature!r}")
    if generation_batch is not None and (
        isinstance(generation_batch, bool)
        or not isinstance(generation_batch, int)
        or generation_batch < 1
    ):
        raise ValueError(
            f"generation_batch must be an integer >= 1 or None, got {generation_batch!r}"
        )
    texts = [p.prompt for p in problems] if prompt_texts is None else list(prompt_texts)
    if len(texts) != len(problems):
        raise ValueError(f"{len(texts)} prompt_texts for {len(problems)} problems")
    pad = tokenizer.pad_token_id
    if pad is None:
        raise ValueError("the tokenizer has no pad token (load_policy falls back to eos)")
    device = next(model.parameters()).device
    eos = torch.tensor(_eos_ids(model, tokenizer), device=device)

    encoded = _encode_prompts(tokenizer, texts)
    width = max(len(ids) for ids in encoded)
    prompt = torch.full((len(encoded), width), pad, dtype=torch.long)  # (M, P)
    p_mask = torch.zeros((len(encoded), width), dtype=torch.long)  # (M, P)
    for j, ids in enumerate(encoded):
        if ids:
            prompt[j, width - len(ids) :] = torch.tensor(ids)
            p_mask[j, width - len(ids) :] = 1
    prompt, p_mask = prompt.to(device), p_mask.to(device)
    owner = torch.arange(len(problems), device=device).repeat_interleave(counts.to(device))  # (N,)

    was_training = model.training
    model.eval()
    parts = []
    record = record and lean_llama.can_record(model)
    n = len(owner)
    # written in place under inference mode, allocated outside it: normal tensors autograd can use
    buffers, lease = (
        lean_llama.record_buffers(model, n, max_new_tokens - 1, device) if record else (None, None)
    )
    try:  # inference mode: no autograd bookkeeping; torch.cat below returns normal tensors
        with torch.inference_mode():
            step = n if generation_batch is None else generation_batch
            for lo in range(0, n, step):
                probs, sizes = torch.unique_consecutive(owner[lo : lo + step], return_counts=True)
                sub, sub_mask = prompt[probs], p_mask[probs]  # (M', P)
                first = int(sub_mask.any(0).long().argmax())  # drop all-padding columns
                part_buffers = None
                if buffers is not None:
                    part_buffers = [{k: b[lo : lo + step] for k, b in ly.items()} for ly in buffers]
                parts.append(
                    _decode(
                        model, sub[:, first:], sub_mask[:, first:], sizes, max_new_tokens,
                        temperature, generator, eos, pad, part_buffers,
                    )  # fmt: skip
                )
    finally:
        model.train(was_training)
    t_width = max(p[0].shape[1] for p in parts)
    out_ids = torch.cat([_pad_to(p[0], t_width, pad, False) for p in parts])  # (N, T)
    out_mask = torch.cat([_pad_to(p[1], t_width, 0, False) for p in parts])  # (N, T)
    recorded = None
    if buffers is not None:
        outputs = [{k: b[:, : t_width - 1] for k, b in layer.items()} for layer in buffers]
        sizes = [len(p[0]) for p in parts]
        valid = torch.repeat_interleave(torch.tensor([p[3] for p in parts]), torch.tensor(sizes))
        stamp = lean_llama.weights_stamp(model)
        recorded = lean_llama.Recorded.of(outputs, stamp, valid.to(device), lease)
    finished = torch.cat([p[2] for p in parts])  # (N,)

    lengths = out_mask.sum(1)  # (N,)
    text_len = (lengths - finished.long()).tolist()  # drop the EOS token from the text
    rows = out_ids.tolist()
    decoded = decode_texts(tokenizer, [row[:k] for row, k in zip(rows, text_len, strict=True)])
    return Rollouts(
        problems=[p for p, g in zip(problems, counts.tolist(), strict=True) for _ in range(g)],
        group_ids=owner,
        prompt_ids=prompt[owner],
        prompt_mask=p_mask[owner],
        response_ids=out_ids,
        response_mask=out_mask,
        finished=finished,
        texts=decoded,
        pad_token_id=int(pad),
        recorded=recorded,
    )


def decode_texts(tokenizer, rows: list[list[int]]) -> list[str]:
    """tokenizer.batch_decode(rows, skip_special_tokens=False), straight through the Rust backend
    of a fast tokenizer when no Python-side clean-up applies (the same strings, ~5x faster)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or getattr(tokenizer, "clean_up_tokenization_spaces", True):
        return tokenizer.batch_decode(rows, skip_special_tokens=False)
    return backend.decode_batch(rows, skip_special_tokens=False)


def _group_counts(group_size: int | Sequence[int], m: int) -> Tensor:
    """(M,) long responses per problem from one G or a per-problem sequence; each >= 1."""
    if isinstance(group_size, int) and not isinstance(group_size, bool):
        if group_size < 1:
            raise ValueError(f"group_size must be an integer >= 1, got {group_size!r}")
        return torch.full((m,), group_size, dtype=torch.long)
    values = list(group_size) if isinstance(group_size, Sequence | Tensor) else None
    if values is None or any(isinstance(g, bool) or int(g) != g or g < 1 for g in values):
        raise ValueError(
            f"group_size must be an integer >= 1 or one such integer per problem, "
            f"got {group_size!r}"
        )
    if len(values) != m:
        raise ValueError(f"{len(values)} group sizes for {m} problems")
    return torch.tensor([int(g) for g in values], dtype=torch.long)


COMPACT_AT = 0.125  # drop finished rows once this fraction of the decode rows has finished


def _select_rows(cache, rows: Tensor):
    """The cache restricted (or repeated) to batch rows `rows`, in that order."""
    if hasattr(cache, "reorder_cache"):
        cache.reorder_cache(rows)
        return cache
    return tuple(tuple(x.index_select(0, rows) for x in layer) for layer in cache)  # legacy


def _sample(logits: Tensor, temperature: float, generator, rows: Tensor, n: int) -> Tensor:
    """Next token of decode rows `rows` (of the call's n) from logits (R, V).

    argmax(p / q), q ~ Exp(1): torch.multinomial's own one-sample algorithm, with q drawn for all
    n rows of the call so a row's draw does not depend on which rows have left the batch."""
    if temperature == 0:
        return logits.argmax(-1)  # (R,)
    probs = torch.softmax(logits.float() / temperature, dim=-1)  # (R, V)
    q = torch.empty((n, probs.shape[1]), dtype=probs.dtype, device=probs.device)
    q.exponential_(1, generator=generator)  # (n, V)
    if rows.shape[0] != n:
        q = q[rows]  # (R, V)
    return (probs / q).argmax(-1)  # (R,)


def _decode(
    model, prompt, p_mask, counts, max_new_tokens, temperature, generator, eos, pad, buffers=None
):
    """The sampling loop over M distinct prompts (M, P), prompt j sampled counts[j] times.

    Returns response ids (N, T), response mask (N, T), finished (N,), N = sum(counts). The
    prompts are prefilled once and their cache rows repeated; decode row r is original row
    rows[r]; when a fraction >= COMPACT_AT of the decode rows has finished they are dropped from
    the cache, the mask and the positions, so later steps compute only live rows. Llama models
    prefill with `lean_llama.forward` and decode with `lean_llama.decode_logits` on
    preallocated key/value buffers (same numbers to float rounding), others with the model's
    own forward and cache. buffers (lean only): `lean_llama.record_buffers` of these N rows,
    written at each forwarded position until the first rows leave the batch (per-row writes
    would cost the decode more than the reuse saves); then a 4th value: the positions written."""
    device = prompt.device
    n = int(counts.sum())
    keep = {"logits_to_keep": 1} if _accepts(model, "logits_to_keep") else {}
    # transformers >= 5.2x names the cache argument `cache`; older versions `past_key_values`.
    cache_arg = "cache" if _accepts(model, "cache") else "past_key_values"
    pos = (p_mask.cumsum(1) - 1).clamp(min=0)  # (M, P)
    expand = torch.arange(len(counts), device=device).repeat_interleave(counts.to(device))  # (N,)
    lean = lean_llama.applies(model)
    width = prompt.shape[1]
    if lean:  # prefill, then key/value buffers of every slot the loop can reach
        last, kv = lean_llama.forward(model, prompt, pos, p_mask, keep_last=True)
        logits, keys, values = last[:, -1], [], []  # (M, V)
        for pair in kv:
            for src, dst in zip(pair, (keys, values), strict=True):
                buf = src.new_empty((n, *src.shape[1:2], width + max_new_tokens - 1, src.shape[3]))
                buf[:, :, :width] = src[expand]
                dst.append(buf)  # (N, H_kv, P + L - 1, hd)
        table = lean_llama.rotary_table(model, int(pos.max()) + max_new_tokens + 1)
        full = F.pad(p_mask[expand].bool(), (0, max_new_tokens - 1), value=True)  # (N, P + L - 1)
        full = None if bool(p_mask.all()) else full[:, None, None]  # (N, 1, 1, P + L - 1)
        logits = logits[expand] if len(counts) != n else logits  # (N, V)
    else:
        out = model(
            input_ids=prompt, attention_mask=p_mask, position_ids=pos, use_cache=True, **keep
        )
        cache, logits = _cache_of(out), out.logits[:, -1]  # (M, V)
        if len(counts) != n:
            cache, logits = _select_rows(cache, expand), logits[expand]  # (N, V)
    attn = p_mask[expand]  # (R, P + t), R decode rows
    next_pos = pos[expand, -1:] + 1  # (R, 1)
    rows = torch.arange(n, device=device)  # (R,) original row of each decode row
    alive = torch.ones(n, dtype=torch.bool, device=device)  # (R,)
    tokens = torch.full((n, max_new_tokens), pad, dtype=torch.long, device=device)  # (N, L)
    mask = torch.zeros((n, max_new_tokens), dtype=torch.long, device=device)  # (N, L)
    finished = torch.zeros(n, dtype=torch.bool, device=device)  # (N,)
    steps = written = 0
    for t in range(max_new_tokens):
        tok = _sample(logits, temperature, generator, rows, n)  # (R,)
        tok = torch.where(alive, tok, pad)  # (R,)
        ended = alive & torch.isin(tok, eos)  # (R,)
        if len(rows) == n:  # nothing dropped yet: decode row r is row r
            tokens[:, t] = tok
            mask[:, t] = alive
            finished |= ended
        else:
            tokens[rows, t] = tok
            mask[rows, t] = alive.long()
            finished[rows] = finished[rows] | ended
        alive = alive & ~ended
        steps = t + 1
        n_alive = int(alive.sum())
        if t + 1 == max_new_tokens or n_alive == 0:
            break
        if n_alive < len(rows) and len(rows) - n_alive >= COMPACT_AT * len(rows):
            live = alive.nonzero().squeeze(1)  # (R',)
            rows, alive, tok, next_pos = rows[live], alive[live], tok[live], next_pos[live]
            if not lean:
                cache, attn = _select_rows(cache, live), attn[live]
            else:
                keys = [k[live] for k in keys]
                values = [v[live] for v in values]
                full = None if full is None else full[live]
        if not lean:
            attn = F.pad(attn, (0, 1), value=1)  # (R, P + t + 1)
            out = model(
                input_ids=tok[:, None],
                attention_mask=attn,
                position_ids=next_pos,
                use_cache=True,
                **{cache_arg: cache},
            )
            cache, logits = _cache_of(out), out.logits[:, -1]  # (R, V)
        else:
            slot = width + t
            step_mask = None if full is None else full[..., : slot + 1]
            project = lean_llama.compute_projection
            if buffers is not None and len(rows) == n:
                project, written = lean_llama.recorder(buffers, t), t + 1
            logits = lean_llama.decode_logits(
                model, tok, next_pos, keys, values, slot, step_mask, table, project
            )
        next_pos = next_pos + 1
    if buffers is not None:
        return tokens[:, :steps], mask[:, :steps], finished, written
    return tokens[:, :steps], mask[:, :steps], finished


FORWARD_OVERHEAD_TOKENS = 192  # one forward's fixed cost, in tokens, for planning buckets


def plan_buckets(
    prompt_lengths: np.ndarray, response_lengths: np.ndarray, max_rows: int, overhead: float
) -> list[np.ndarray]:
    """Rows cut into forward buckets with little padding: row indices per bucket.

    Rows sorted by (response, prompt) length are cut into consecutive buckets of at most
    max_rows rows minimizing sum_b [n_b (max p_b + max t_b) + overhead], the padded tokens a
    bucket computes plus a fixed cost per forward (dynamic programming over the cut points, one
    vectorized pass per row)."""
    order = np.lexsort((prompt_lengths, response_lengths))  # (N,)
    p, t = prompt_lengths[order], response_lengths[order]
    n = len(order)
    best = np.zeros(n + 1)  # best[j]: cost of rows :j
    cut = np.zeros(n + 1, dtype=np.int64)  # start of the last bucket of rows :j
    for j in range(1, n + 1):
        lo = max(0, j - max_rows)
        p_max = np.maximum.accumulate(p[lo:j][::-1])[::-1]  # max p[i:j] for i = lo..j-1
        cost = best[lo:j] + (j - np.arange(lo, j)) * (p_max + t[j - 1]) + overhead
        k = int(np.argmin(cost))
        best[j], cut[j] = cost[k], lo + k
    bounds, j = [], n
    while j > 0:
        bounds.append((cut[j], j))
        j = cut[j]
    return [order[a:b] for a, b in reversed(bounds)]


def _bucket_logits(
    model, prompt, p_mask, target, resp_mask, can_keep: bool, known=None, holds=()
) -> Tensor:
    """Float logits (B, tw, V) predicting target[:, t] from prompt + target[:, :t].

    Each distinct prompt row is forwarded once and its cache repeated over the rows sharing it
    (a group's G responses), then target[:, :tw-1] is forwarded on that cache: the prompt is
    not recomputed per response and the last response token (which predicts nothing) is not
    forwarded. Without a returned cache: one forward over concat(prompt, target). known, holds
    (lean only): the response tokens' recorded projection outputs and their record's leases
    (`lean_llama.forward`)."""
    pw, tw = prompt.shape[1], target.shape[1]
    key = torch.cat([prompt, p_mask], 1)  # (B, 2 pw)
    uniq, inverse = torch.unique(key, dim=0, return_inverse=True)  # (U, 2 pw), (B,)
    u_ids, u_mask = uniq[:, :pw], uniq[:, pw:]
    u_pos = (u_mask.cumsum(1) - 1).clamp(min=0)  # (U, pw)
    if lean_llama.applies(model):  # the same forwards through lean_llama
        last, kv = lean_llama.forward(model, u_ids, u_pos, u_mask, keep_last=True)
        first = last.float()[inverse]  # (B, 1, V)
        if tw == 1:
            return first
        attn = torch.cat([p_mask, resp_mask[:, : tw - 1]], 1)  # (B, pw + tw - 1)
        pos = (attn.cumsum(1) - 1).clamp(min=0)[:, pw:]  # (B, tw - 1)
        past = [(k[inverse], v[inverse]) for k, v in kv]
        logits, _ = lean_llama.forward(
            model, target[:, : tw - 1], pos, attn, past, known=known, holds=holds
        )
        return torch.cat([first, logits.float()], 1)  # (B, tw, V)
    keep = {"logits_to_keep": 1} if can_keep else {}
    out = model(input_ids=u_ids, attention_mask=u_mask, position_ids=u_pos, use_cache=True, **keep)
    cache = _cache_of(out)
    first = out.logits[:, -1:].float()[inverse]  # (B, 1, V) predicts o_1
    if tw == 1:
        return first
    if cache is None:  # no cache: one plain forward over the whole sequence
        ids = torch.cat([prompt, target], 1)  # (B, pw + tw)
        attn = torch.cat([p_mask, resp_mask], 1)
        pos = (attn.cumsum(1) - 1).clamp(min=0)
        keep = {"logits_to_keep": tw + 1} if can_keep else {}
        out = model(input_ids=ids, attention_mask=attn, position_ids=pos, **keep)
        return out.logits[:, -(tw + 1) : -1].float()
    cache = _select_rows(cache, inverse)
    attn = torch.cat([p_mask, resp_mask[:, : tw - 1]], 1)  # (B, pw + tw - 1)
    pos = (attn.cumsum(1) - 1).clamp(min=0)[:, pw:]  # (B, tw - 1)
    cache_arg = "cache" if _accepts(model, "cache") else "past_key_values"
    out = model(
        input_ids=target[:, : tw - 1],
        attention_mask=attn,
        position_ids=pos,
        use_cache=True,
        **{cache_arg: cache},
    )
    return torch.cat([first, out.logits.float()], 1)  # (B, tw, V)


def response_logprobs(
    model: torch.nn.Module, rollouts: Rollouts, micro_batch: int | None = None
) -> Tensor:
    """log pi(o_t | x, o_<t) for every response token, (N, T), 0 where the mask is 0.

    Forwards over concat(prompt, response) with positions cumsum(mask) - 1, as in generation,
    each distinct prompt once per bucket (`_bucket_logits`). Rows are grouped into buckets of
    similar length (`plan_buckets`, at most `micro_batch` rows each, None = no limit) and each
    bucket is cut to its own longest prompt and response, so padding is barely computed.
    Logits are formed only at the positions that predict a response token and log pi =
    logit[o_t] - logsumexp(logits), so no (N, P+T, V) log-softmax is built. Rollouts recorded
    by this model with its current weights (`generate_groups(record=True)`) take the sampler's
    projection outputs instead of recomputing them (same values to float rounding; the
    gradient is the linear's). Differentiable.
    """
    n = len(rollouts)
    if micro_batch is None:
        micro_batch = max(n, 1)
    if isinstance(micro_batch, bool) or not isinstance(micro_batch, int) or micro_batch < 1:
        raise ValueError(f"micro_batch must be an integer >= 1 or None, got {micro_batch!r}")
    device = rollouts.response_ids.device
    p_width, t_len = rollouts.prompt_ids.shape[1], rollouts.response_ids.shape[1]
    if t_len == 0 or n == 0:
        return torch.zeros((n, t_len), device=device)
    p_lens = rollouts.prompt_mask.sum(1).cpu().numpy()  # (N,)
    t_lens = rollouts.response_mask.sum(1).cpu().numpy()  # (N,)
    buckets = plan_buckets(p_lens, t_lens, micro_batch, FORWARD_OVERHEAD_TOKENS)
    can_keep = _accepts(model, "logits_to_keep")
    recorded = rollouts.recorded
    if recorded is not None and not (lean_llama.applies(model) and recorded.valid_for(model)):
        recorded = None
    chunks = []
    for rows in buckets:
        pw, tw = int(p_lens[rows].max()), int(t_lens[rows].max())
        if tw == 0:
            chunks.append(torch.zeros((len(rows), t_len), device=device))
            continue
        idx = torch.as_tensor(rows, device=device)
        prompt = rollouts.prompt_ids[idx, p_width - pw :]  # (B, pw)
        p_mask = rollouts.prompt_mask[idx, p_width - pw :]  # (B, pw)
        target = rollouts.response_ids[idx, :tw]  # (B, tw)
        resp_mask = rollouts.response_mask[idx, :tw]  # (B, tw)
        known = None if recorded is None else recorded.gather(idx, tw - 1)
        holds = () if known is None else recorded.leases
        logits = _bucket_logits(model, prompt, p_mask, target, resp_mask, can_keep, known, holds)
        picked = logits.gather(-1, target.unsqueeze(-1)).squeeze(-1)  # (B, tw)
        logp = torch.where(resp_mask.bool(), picked - torch.logsumexp(logits, dim=-1), 0.0)
        chunks.append(F.pad(logp, (0, t_len - tw)))  # (B, T)
    order = torch.as_tensor(np.concatenate(buckets), device=device)  # (N,) sorted row of each
    inverse = torch.empty_like(order)
    inverse[order] = torch.arange(n, device=device)
    return torch.cat(chunks)[inverse]  # (N, T)
