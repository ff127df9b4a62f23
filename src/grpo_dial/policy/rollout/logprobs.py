"""Log-probabilities of sampled responses under the policy (`response_logprobs`), for the update.

log pi(o_t | x, o_<t) at temperature 1, from differentiable forwards over concat(prompt,
response) with the masks and positions the sampler used (pos = cumsum(mask) - 1), so left and
right padding change nothing.

Fast paths, each exact: rows run in buckets of similar length cut to their own width
(`plan_buckets`), so padding is barely computed; each distinct prompt is forwarded once per
bucket and its cache repeated over its responses; Llama models run through `lean_llama`; rollouts
recorded with the current weights (`activation_record`) take the sampler's projection outputs
instead of recomputing them (the same values to float rounding).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from grpo_dial.policy import activation_record, lean_llama
from grpo_dial.policy.rollout.generic_forward import accepts, cache_arg, cache_of, select_rows
from grpo_dial.policy.rollout.rollouts import Rollouts

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
    (`activation_record.known_projector`)."""
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
        project = lean_llama.compute_projection
        if known is not None:  # the recorded outputs instead of the projections' matmuls
            project = activation_record.known_projector(known, holds)
        logits, _ = lean_llama.forward(model, target[:, : tw - 1], pos, attn, past, project=project)
        return torch.cat([first, logits.float()], 1)  # (B, tw, V)
    if lean_llama.checkpointing(model):  # no cache under checkpointing: one plain forward
        return _plain_logits(model, prompt, p_mask, target, resp_mask, can_keep)
    keep = {"logits_to_keep": 1} if can_keep else {}
    out = model(input_ids=u_ids, attention_mask=u_mask, position_ids=u_pos, use_cache=True, **keep)
    cache = cache_of(out)
    first = out.logits[:, -1:].float()[inverse]  # (B, 1, V) predicts o_1
    if tw == 1:
        return first
    if cache is None:  # no cache: one plain forward over the whole sequence
        return _plain_logits(model, prompt, p_mask, target, resp_mask, can_keep)
    cache = select_rows(cache, inverse)
    attn = torch.cat([p_mask, resp_mask[:, : tw - 1]], 1)  # (B, pw + tw - 1)
    pos = (attn.cumsum(1) - 1).clamp(min=0)[:, pw:]  # (B, tw - 1)
    out = model(
        input_ids=target[:, : tw - 1],
        attention_mask=attn,
        position_ids=pos,
        use_cache=True,
        **{cache_arg(model): cache},
    )
    return torch.cat([first, out.logits.float()], 1)  # (B, tw, V)


def _plain_logits(model, prompt, p_mask, target, resp_mask, can_keep: bool) -> Tensor:
    """Float logits (B, tw, V) from one forward over concat(prompt, target): for models whose
    forward returns no cache (e.g. Hugging Face layers under gradient checkpointing), so the
    prompt is not forwarded a second time."""
    tw = target.shape[1]
    ids = torch.cat([prompt, target], 1)  # (B, pw + tw)
    attn = torch.cat([p_mask, resp_mask], 1)
    pos = (attn.cumsum(1) - 1).clamp(min=0)
    keep = {"logits_to_keep": tw + 1} if can_keep else {}
    out = model(input_ids=ids, attention_mask=attn, position_ids=pos, **keep)
    return out.logits[:, -(tw + 1) : -1].float()


def bucket_logprobs(
    model: torch.nn.Module, rollouts: Rollouts, micro_batch: int | None = None
) -> Iterator[tuple[Tensor, Tensor]]:
    """(rows (B_b,) long, logp (B_b, tw_b)) per bucket, each forwarded only when asked for.

    The buckets of `response_logprobs` (`plan_buckets`, at most `micro_batch` rows each), their
    log pi(o_t | x, o_<t) cut to the bucket's longest response tw_b (0 where the mask is 0).
    Lazy: a caller that takes one bucket's backward before asking for the next holds one
    bucket's autograd graph at a time. Differentiable."""
    n = len(rollouts)
    if micro_batch is None:
        micro_batch = max(n, 1)
    if isinstance(micro_batch, bool) or not isinstance(micro_batch, int) or micro_batch < 1:
        raise ValueError(f"micro_batch must be an integer >= 1 or None, got {micro_batch!r}")
    if n == 0 or rollouts.response_ids.shape[1] == 0:
        return iter(())
    p_lens = rollouts.prompt_mask.sum(1).cpu().numpy()  # (N,)
    t_lens = rollouts.response_mask.sum(1).cpu().numpy()  # (N,)
    buckets = plan_buckets(p_lens, t_lens, micro_batch, FORWARD_OVERHEAD_TOKENS)
    return _forward_buckets(model, rollouts, buckets, p_lens, t_lens)


def _forward_buckets(model, rollouts: Rollouts, buckets, p_lens, t_lens):
    device = rollouts.response_ids.device
    p_width = rollouts.prompt_ids.shape[1]
    can_keep = accepts(model, "logits_to_keep")
    recorded = rollouts.recorded
    if recorded is not None and not (lean_llama.applies(model) and recorded.valid_for(model)):
        recorded = None
    for rows in buckets:
        pw, tw = int(p_lens[rows].max()), int(t_lens[rows].max())
        idx = torch.as_tensor(rows, device=device)
        if tw == 0:
            yield idx, torch.zeros((len(rows), 0), device=device)
            continue
        prompt = rollouts.prompt_ids[idx, p_width - pw :]  # (B, pw)
        p_mask = rollouts.prompt_mask[idx, p_width - pw :]  # (B, pw)
        target = rollouts.response_ids[idx, :tw]  # (B, tw)
        resp_mask = rollouts.response_mask[idx, :tw]  # (B, tw)
        known = None if recorded is None else recorded.gather(idx, tw - 1)
        holds = () if known is None else recorded.leases
        logits = _bucket_logits(model, prompt, p_mask, target, resp_mask, can_keep, known, holds)
        picked = logits.gather(-1, target.unsqueeze(-1)).squeeze(-1)  # (B, tw)
        logp = torch.where(resp_mask.bool(), picked - torch.logsumexp(logits, dim=-1), 0.0)
        del logits  # the graph keeps what the backward needs
        yield idx, logp  # (B, tw)


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
    gradient is the linear's). Differentiable; every bucket's graph is held until the caller's
    backward (`bucket_logprobs` lets an update take one bucket's backward at a time).
    """
    n, t_len = len(rollouts), rollouts.response_ids.shape[1]
    device = rollouts.response_ids.device
    parts = list(bucket_logprobs(model, rollouts, micro_batch))
    if not parts:
        return torch.zeros((n, t_len), device=device)
    chunks = [F.pad(logp, (0, t_len - logp.shape[1])) for _, logp in parts]  # (B, T) each
    order = torch.cat([rows for rows, _ in parts])  # (N,) sorted row of each
    inverse = torch.empty_like(order)
    inverse[order] = torch.arange(n, device=device)
    return torch.cat(chunks)[inverse]  # (N, T)
