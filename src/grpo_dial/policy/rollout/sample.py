"""Sampling groups of responses with a KV cache (`generate_groups`).

For M problems and group size G the N = M G sequences are x_j = bos + prompt_j (left-padded to
width P), each repeated G times. Decoding draws o_t ~ softmax(logits_t / temperature) (argmax at
temperature 0) until the end-of-sequence token or `max_new_tokens`; position ids count only real
tokens, pos = cumsum(mask) - 1, so left padding never changes a sequence's distribution.

Fast paths, each exact: a prompt is prefilled once per group and its cache repeated; finished
rows leave the decode batch; Llama models decode through `lean_llama` (the same numbers without
the generic forward's overhead), and a decode asked to `record` keeps its projection outputs
(`activation_record`) for the log-prob forward of the same weights.

Special tokens (`banned_ids`): the tokenizer's pad, bos and unk tokens are never drawn (their
logits are set to -inf before the draw) unless one of them also ends a response. A response is
text the policy writes; a pad, bos or unk token inside it is no character of any answer, and a
character-level policy that emits them writes five printed characters per token ("<pad>"). The
draw is argmax(p / q) over every vocabulary entry with the same Exp(1) noise q, so masking only
renormalizes the allowed tokens' probabilities: a draw that was not a banned token is unchanged.
The log-probs of the update (rollout/logprobs.py) are the unmasked policy's; the banned tokens'
mass is what they differ by (about 0.35 % per token on the aware task's warm-started policy,
aware/base.csv).

All randomness comes from the `generator` passed in: the same generator state, model, inputs and
generation_batch give the same rollouts (on the same device and thread count).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from grpo_dial.data.tasks.base import Problem
from grpo_dial.policy import activation_record, lean_llama
from grpo_dial.policy.rollout.forced import encode_prefixes
from grpo_dial.policy.rollout.generic_forward import accepts, cache_arg, cache_of, select_rows
from grpo_dial.policy.rollout.rollouts import Rollouts, pad_to


def eos_ids(model: torch.nn.Module, tokenizer) -> list[int]:
    """Every id that ends a response: the tokenizer's eos and the generation config's (list)."""
    ids = {tokenizer.eos_token_id}
    gen = getattr(model, "generation_config", None)
    extra = getattr(gen, "eos_token_id", None) if gen is not None else None
    ids.update(extra if isinstance(extra, list | tuple) else [extra])
    ids.discard(None)
    if not ids:
        raise ValueError("the tokenizer has no eos token: responses could never finish")
    return sorted(int(i) for i in ids)


def banned_ids(tokenizer, eos: list[int]) -> list[int]:
    """The ids the sampler never draws: the tokenizer's pad, bos and unk tokens, less any id in
    `eos` (a tokenizer whose pad falls back to eos still ends responses with it)."""
    ids = {getattr(tokenizer, f"{k}_token_id", None) for k in ("pad", "bos", "unk")}
    ids.discard(None)
    return sorted(int(i) for i in ids - set(eos))


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
    check_every: int = 8,
    prefixes: list[str] | None = None,
) -> Rollouts:
    """G = group_size responses per problem, sampled with a KV cache.

    group_size is one G for every problem or one G_j >= 1 per problem (adaptive allocation); rows
    are problem-major: problem j's G_j samples are consecutive and share group id j (with one G,
    row i = j G + g is sample g of problem j). `prompt_texts` replaces the problems' prompt text
    (plain text: the tokenizer's chat template, if any, is applied here). Each decode call
    prefills every distinct prompt once and repeats its cache G_j times, then decodes one token
    per step; finished rows leave the batch (the cache rows are compacted); it stops when all
    rows are finished. temperature 0 is greedy. `generation_batch` rows per decode call
    (None = all N) bound the memory; the calls run in row order. Random draws use only
    `generator` (None: torch's global RNG), which must live on the model's device: each step
    draws Exp(1) noise for all the call's rows, as torch.multinomial does, so dropping finished
    rows never changes the live rows' tokens, and with generation_batch None the stream equals
    torch.multinomial's. A different generation_batch gives other (equally distributed) samples
    from the same generator state.
    record: keep every projection's output at each forwarded response position
    (`Rollouts.recorded`, where `activation_record.can_record(model)`), so that
    `response_logprobs` with unchanged weights skips the projections' matmuls; costs their size
    in memory (`activation_record.recorded_bytes`).
    check_every: tokens between reads of how many rows are still running (each read is a host
    sync); the rollouts are the same for any value. Logits that are NaN or +inf (or all -inf)
    stop the sampling with a ValueError.
    prefixes: one text per row (rollout/forced.py) written as the response's first tokens in
    place of the sampled ones (`Rollouts.forced` counts them); None: nothing forced.
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
    if isinstance(check_every, bool) or not isinstance(check_every, int) or check_every < 1:
        raise ValueError(f"check_every must be an integer >= 1, got {check_every!r}")
    texts = [p.prompt for p in problems] if prompt_texts is None else list(prompt_texts)
    if len(texts) != len(problems):
        raise ValueError(f"{len(texts)} prompt_texts for {len(problems)} problems")
    pad = tokenizer.pad_token_id
    if pad is None:
        raise ValueError("the tokenizer has no pad token (load_policy falls back to eos)")
    device = next(model.parameters()).device
    eos_list = eos_ids(model, tokenizer)
    eos = torch.tensor(eos_list, device=device)
    banned = torch.tensor(banned_ids(tokenizer, eos_list), dtype=torch.long, device=device)

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
    forced = None
    if prefixes is not None:
        if len(prefixes) != len(owner):
            raise ValueError(f"{len(prefixes)} prefixes for {len(owner)} responses")
        forced = encode_prefixes(tokenizer, list(prefixes), device)  # (N, F), (N,)

    was_training = model.training
    model.eval()
    parts = []
    record = record and activation_record.can_record(model)
    n = len(owner)
    # written in place under inference mode, allocated outside it: normal tensors autograd can use
    buffers, lease = None, None
    if record:
        buffers, lease = activation_record.record_buffers(model, n, max_new_tokens - 1, device)
    try:  # inference mode: no autograd bookkeeping; torch.cat below returns normal tensors
        with torch.inference_mode():
            step = n if generation_batch is None else generation_batch
            for lo in range(0, n, step):
                probs, sizes = torch.unique_consecutive(owner[lo : lo + step], return_counts=True)
                sub, sub_mask = prompt[probs], p_mask[probs]  # (M', P)
                first = int(sub_mask.any(0).long().argmax())  # drop all-padding columns
                part_buffers, part_forced = None, None
                if forced is not None:
                    part_forced = (forced[0][lo : lo + step], forced[1][lo : lo + step])
                if buffers is not None:
                    part_buffers = [{k: b[lo : lo + step] for k, b in ly.items()} for ly in buffers]
                parts.append(
                    _decode(
                        model, sub[:, first:], sub_mask[:, first:], sizes, max_new_tokens,
                        temperature, generator, eos, pad, part_buffers, check_every, part_forced,
                        banned,
                    )  # fmt: skip
                )
    finally:
        model.train(was_training)
    t_width = max(p[0].shape[1] for p in parts)
    out_ids = torch.cat([pad_to(p[0], t_width, pad, False) for p in parts])  # (N, T)
    out_mask = torch.cat([pad_to(p[1], t_width, 0, False) for p in parts])  # (N, T)
    recorded = None
    if buffers is not None:
        outputs = [{k: b[:, : t_width - 1] for k, b in layer.items()} for layer in buffers]
        sizes = [len(p[0]) for p in parts]
        valid = torch.repeat_interleave(torch.tensor([p[3] for p in parts]), torch.tensor(sizes))
        stamp = activation_record.weights_stamp(model)
        recorded = activation_record.Recorded.of(outputs, stamp, valid.to(device), lease)
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
        forced=None if forced is None else forced[1].clamp(max=out_mask.shape[1]),
        prefixes=None if prefixes is None else list(prefixes),
    )


def decode_texts(tokenizer, rows: list[list[int]]) -> list[str]:
    """tokenizer.batch_decode(rows, skip_special_tokens=False), straight through the Rust backend
    of a fast tokenizer when no Python-side clean-up applies (the same strings, faster)."""
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


def _next_tokens(
    logits: Tensor,
    temperature: float,
    generator,
    rows: Tensor,
    n: int,
    banned: Tensor | None = None,
) -> Tensor:
    """Next token of decode rows `rows` (of the call's n) from logits (R, V), never one of the
    ids `banned` (K,) (module docstring).

    argmax(p / q), q ~ Exp(1): torch.multinomial's own one-sample algorithm, with q drawn for all
    n rows of the call so a row's draw does not depend on which rows have left the batch."""
    if banned is not None and banned.numel():
        logits = logits.index_fill(-1, banned, float("-inf"))  # (R, V)
    if temperature == 0:
        return logits.argmax(-1)  # (R,)
    probs = torch.softmax(logits.float() / temperature, dim=-1)  # (R, V)
    q = torch.empty((n, probs.shape[1]), dtype=probs.dtype, device=probs.device)
    q.exponential_(1, generator=generator)  # (n, V)
    if rows.shape[0] != n:
        q = q[rows]  # (R, V)
    return (probs / q).argmax(-1)  # (R,)


def _decode(
    model, prompt, p_mask, counts, max_new_tokens, temperature, generator, eos, pad, buffers=None,
    check_every=1, forced=None, banned=None,
):  # fmt: skip
    """The sampling loop over M distinct prompts (M, P), prompt j sampled counts[j] times.

    Returns response ids (N, T), response mask (N, T), finished (N,), N = sum(counts). The
    prompts are prefilled once and their cache rows repeated; decode row r is original row
    rows[r]; every `check_every` tokens the loop reads how many rows are alive (the only host
    sync): it stops when none is, and when a fraction >= COMPACT_AT of the decode rows has
    finished they are dropped from the cache, the mask and the positions, so later steps compute
    only live rows. Steps past the last row's end only add padding, cut off at the end (the
    width is the longest response), so the rollouts do not depend on check_every. Llama models
    prefill with `lean_llama.forward` and decode with `lean_llama.decode_logits` on
    preallocated key/value buffers (same numbers to float rounding), others with the model's
    own forward and cache. buffers (lean only): `activation_record.record_buffers` of these N
    rows, written at each forwarded position until the first rows leave the batch (per-row
    writes would cost the decode more than the reuse saves); then a 4th value: the positions
    written. forced: (ids (N, F), lengths (N,)) written in place of the first draws. banned: (K,)
    ids never drawn (`banned_ids`)."""
    device = prompt.device
    n = int(counts.sum())
    keep = {"logits_to_keep": 1} if accepts(model, "logits_to_keep") else {}
    cache_name = cache_arg(model)
    pos = (p_mask.cumsum(1) - 1).clamp(min=0)  # (M, P)
    expand = torch.arange(len(counts), device=device).repeat_interleave(counts.to(device))  # (N,)
    lean = lean_llama.applies(model)
    width = prompt.shape[1]
    if lean:  # prefill, then key/value buffers of every slot the loop can reach
        last, kv = lean_llama.forward(model, prompt, pos, p_mask, keep_last=True)
        logits, keys, values = last[:, -1], [], []  # (M, V)
        for pair in kv:
            for src, dst in zip(pair, (keys, values), strict=True):
                shape = (n, src.shape[1], width + max_new_tokens - 1, src.shape[3])
                buf = src.new_empty(shape, dtype=lean_llama.kv_dtype(src))  # compute dtype
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
        cache, logits = cache_of(out), out.logits[:, -1]  # (M, V)
        if len(counts) != n:
            cache, logits = select_rows(cache, expand), logits[expand]  # (N, V)
    attn = p_mask[expand]  # (R, P + t), R decode rows
    next_pos = pos[expand, -1:] + 1  # (R, 1)
    rows = torch.arange(n, device=device)  # (R,) original row of each decode row
    alive = torch.ones(n, dtype=torch.bool, device=device)  # (R,)
    tokens = torch.full((n, max_new_tokens), pad, dtype=torch.long, device=device)  # (N, L)
    mask = torch.zeros((n, max_new_tokens), dtype=torch.long, device=device)  # (N, L)
    finished = torch.zeros(n, dtype=torch.bool, device=device)  # (N,)
    written = 0
    bad = torch.zeros((), dtype=torch.bool, device=device)  # any non-finite logits so far
    for t in range(max_new_tokens):
        bad |= ~torch.isfinite(logits.amax(-1)).all()  # NaN, +inf or all -inf; no sync
        tok = _next_tokens(logits, temperature, generator, rows, n, banned)  # (R,)
        if forced is not None and t < forced[0].shape[1]:  # the task's prefix, not the draw
            tok = torch.where(t < forced[1][rows], forced[0][rows, t], tok)  # (R,)
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
        if t + 1 == max_new_tokens:
            break
        if (t + 1) % check_every == 0:
            _refuse_nonfinite(bad, t + 1)
            n_alive = int(alive.sum())
            if n_alive == 0:
                break
            if n_alive < len(rows) and len(rows) - n_alive >= COMPACT_AT * len(rows):
                live = alive.nonzero().squeeze(1)  # (R',)
                rows, alive, tok, next_pos = rows[live], alive[live], tok[live], next_pos[live]
                if not lean:
                    cache, attn = select_rows(cache, live), attn[live]
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
                **{cache_name: cache},
            )
            cache, logits = cache_of(out), out.logits[:, -1]  # (R, V)
        else:
            slot = width + t
            step_mask = None if full is None else full[..., : slot + 1]
            project = lean_llama.compute_projection
            if buffers is not None and len(rows) == n:
                project, written = activation_record.recorder(buffers, t), t + 1
            logits = lean_llama.decode_logits(
                model, tok, next_pos, keys, values, slot, step_mask, table, project
            )
        next_pos = next_pos + 1
    _refuse_nonfinite(bad, max_new_tokens)
    steps = int(mask.sum(1).max())  # the longest response: later steps only added padding
    if buffers is not None:
        return tokens[:, :steps], mask[:, :steps], finished, min(written, steps - 1)
    return tokens[:, :steps], mask[:, :steps], finished


def _refuse_nonfinite(bad: Tensor, t: int) -> None:
    if bool(bad):
        raise ValueError(
            f"sampling stopped: the policy's logits are NaN or inf (by token {t}); the "
            "weights or the forward are not finite (a diverged update, fp16 overflow?)"
        )
