"""Sampling groups of responses with a KV cache, and the log-probabilities of what was sampled.

For M problems and group size G the N = M G sequences are x_j = bos + prompt_j (left-padded to
width P), each repeated G times. Decoding draws o_t ~ softmax(logits_t / temperature) (argmax at
temperature 0) until the end-of-sequence token or `max_new_tokens`; position ids count only real
tokens, pos = cumsum(mask) - 1, so left padding never changes a sequence's distribution.
`response_logprobs` returns log pi(o_t | x, o_<t) at temperature 1 with the same masks and
positions, in one differentiable forward over concat(prompt, response).

All randomness comes from the `generator` passed in: the same generator state, model and inputs
give the same rollouts (on the same device and thread count).
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from grpo_dial.tasks.base import Problem


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
    )


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
    """bos + text for each prompt (bos skipped if the tokenizer has none or the text has it)."""
    bos = tokenizer.bos_token_id
    out = []
    for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]:
        out.append(ids if bos is None or (ids and ids[0] == bos) else [bos, *ids])
    return out


def generate_groups(
    model: torch.nn.Module,
    tokenizer,
    problems: list[Problem],
    group_size: int | Sequence[int],
    max_new_tokens: int,
    temperature: float = 1.0,
    generator: torch.Generator | None = None,
    prompt_texts: list[str] | None = None,
) -> Rollouts:
    """G = group_size responses per problem, sampled with a KV cache.

    group_size is one G for every problem or one G_j >= 1 per problem (adaptive allocation); rows
    are problem-major: problem j's G_j samples are consecutive and share group id j (with one G,
    row i = j G + g is sample g of problem j). `prompt_texts` replaces the problems' prompt text
    (e.g. a chat template applied by the caller). One prefill over the left-padded prompts, then
    one token per step; a finished row keeps emitting pad (masked); the loop stops when all rows
    are finished. temperature 0 is greedy. Random draws use only `generator` (None: torch's global
    RNG), which must live on the model's device.
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
    prompt = prompt.repeat_interleave(counts, 0).to(device)  # (N, P)
    p_mask = p_mask.repeat_interleave(counts, 0).to(device)  # (N, P)

    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            out_ids, out_mask, finished = _decode(
                model, prompt, p_mask, max_new_tokens, temperature, generator, eos, pad
            )
    finally:
        model.train(was_training)

    lengths = out_mask.sum(1)  # (N,)
    text_len = (lengths - finished.long()).tolist()  # drop the EOS token from the text
    rows = out_ids.tolist()
    decoded = tokenizer.batch_decode(
        [row[:k] for row, k in zip(rows, text_len, strict=True)], skip_special_tokens=False
    )
    return Rollouts(
        problems=[p for p, g in zip(problems, counts.tolist(), strict=True) for _ in range(g)],
        group_ids=torch.arange(len(problems), device=device).repeat_interleave(counts.to(device)),
        prompt_ids=prompt,
        prompt_mask=p_mask,
        response_ids=out_ids,
        response_mask=out_mask,
        finished=finished,
        texts=decoded,
        pad_token_id=int(pad),
    )


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


def _decode(model, prompt, p_mask, max_new_tokens, temperature, generator, eos, pad):
    """The sampling loop: returns response ids (N, T), response mask (N, T), finished (N,)."""
    n, device = prompt.shape[0], prompt.device
    keep = {"logits_to_keep": 1} if _accepts(model, "logits_to_keep") else {}
    # transformers >= 5.2x names the cache argument `cache`; older versions `past_key_values`.
    cache_arg = "cache" if _accepts(model, "cache") else "past_key_values"
    attn = p_mask  # (N, P + t)
    pos = (p_mask.cumsum(1) - 1).clamp(min=0)  # (N, P)
    out = model(input_ids=prompt, attention_mask=attn, position_ids=pos, use_cache=True, **keep)
    cache, logits = _cache_of(out), out.logits[:, -1]  # (N, V)
    next_pos = pos[:, -1:] + 1  # (N, 1)
    tokens = torch.full((n, max_new_tokens), pad, dtype=torch.long, device=device)  # (N, L)
    mask = torch.zeros((n, max_new_tokens), dtype=torch.long, device=device)  # (N, L)
    finished = torch.zeros(n, dtype=torch.bool, device=device)  # (N,)
    ones = torch.ones((n, 1), dtype=attn.dtype, device=device)  # (N, 1)
    steps = 0
    for t in range(max_new_tokens):
        if temperature == 0:
            tok = logits.argmax(-1)  # (N,)
        else:
            probs = torch.softmax(logits.float() / temperature, dim=-1)  # (N, V)
            tok = torch.multinomial(probs, 1, generator=generator).squeeze(1)  # (N,)
        live = ~finished  # (N,)
        tokens[:, t] = torch.where(live, tok, pad)
        mask[:, t] = live
        finished = finished | (live & torch.isin(tok, eos))
        steps = t + 1
        if t + 1 == max_new_tokens or bool(finished.all()):
            break
        attn = torch.cat([attn, ones], 1)  # (N, P + t + 1)
        out = model(
            input_ids=tokens[:, t : t + 1],
            attention_mask=attn,
            position_ids=next_pos,
            use_cache=True,
            **{cache_arg: cache},
        )
        cache, logits = _cache_of(out), out.logits[:, -1]  # (N, V)
        next_pos = next_pos + 1
    return tokens[:, :steps], mask[:, :steps], finished


def response_logprobs(
    model: torch.nn.Module, rollouts: Rollouts, micro_batch: int | None = None
) -> Tensor:
    """log pi(o_t | x, o_<t) for every response token, (N, T), 0 where the mask is 0.

    One forward over concat(prompt, response) with positions cumsum(mask) - 1, as in generation.
    Logits are formed only at the T positions that predict a response token (when the model
    accepts `logits_to_keep`) and log pi = logit[o_t] - logsumexp(logits), so no (N, P+T, V)
    log-softmax is built. Differentiable; `micro_batch` rows per forward bound the memory.
    """
    n = len(rollouts)
    if micro_batch is None:
        micro_batch = max(n, 1)
    if isinstance(micro_batch, bool) or not isinstance(micro_batch, int) or micro_batch < 1:
        raise ValueError(f"micro_batch must be an integer >= 1 or None, got {micro_batch!r}")
    ids = torch.cat([rollouts.prompt_ids, rollouts.response_ids], 1)  # (N, P+T)
    attn = torch.cat([rollouts.prompt_mask, rollouts.response_mask], 1)  # (N, P+T)
    pos = (attn.cumsum(1) - 1).clamp(min=0)  # (N, P+T)
    t_len = rollouts.response_ids.shape[1]
    if t_len == 0:
        return torch.zeros((n, 0), device=ids.device)
    keep = {"logits_to_keep": t_len + 1} if _accepts(model, "logits_to_keep") else {}
    chunks = []
    for lo in range(0, n, micro_batch):
        sl = slice(lo, lo + micro_batch)
        logits = model(input_ids=ids[sl], attention_mask=attn[sl], position_ids=pos[sl], **keep)
        logits = logits.logits[:, -(t_len + 1) : -1].float()  # (B, T, V) predicts o_1..o_T
        target = rollouts.response_ids[sl]  # (B, T)
        picked = logits.gather(-1, target.unsqueeze(-1)).squeeze(-1)  # (B, T)
        logp = picked - torch.logsumexp(logits, dim=-1)  # (B, T)
        chunks.append(torch.where(rollouts.response_mask[sl].bool(), logp, 0.0))
    return torch.cat(chunks)
