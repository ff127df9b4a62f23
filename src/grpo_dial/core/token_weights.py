"""Token weights of every loss normalizer, from the response masks alone (and, for lambda-GRPO,
the group ids and lambda): w (B, T) with sum_it w_it l_it the aggregated loss. Used through
grpo_dial.core.advantage, which picks one per dial (`make_token_weights`).

    sequence (GRPO):     m_it / (B max(|o_i|, 1))          verl seq-mean-token-mean
    token (DAPO):        m_it / max(sum_it m_it, 1)         verl token-mean
    constant (Dr. GRPO): m_it / (B L_max)                   verl seq-mean-token-sum-norm
    sequence_sum (LUSPO, TRL 'luspo'): m_it / B             verl seq-mean-token-sum
    sum:                 m_it                               verl token-sum
    bnpo (TRL 'bnpo'):   m_it / (C max(n_c, 1)), n_c the tokens of row i's micro-batch c of R
                         consecutive rows, C = ceil(B / R) micro-batches (the token mean of each
                         micro-batch, averaged over them)
    lambda (lambda-GRPO, arXiv 2510.06870): m_it f_i / max(sum_it m_it, 1),
        f_i = G_g softmax_{j in g}(h_j^lambda)_i, h_i = max(1 + r z_i, 1e-3), z_i = (|o_i| - mu_g)
        / sigma_g, the paper's J = (1 / sum_i |o_i|) sum_i f_i sum_t l_it. Its unified form has
        GRPO (f_i = sum_j |o_j| / (B |o_i|)), DAPO (f = 1, lambda = 0) and Dr. GRPO (f_i =
        sum_j |o_j| / (B L_max)) as presets; the learnable lambda moves between long and short.

B counts every response (TRL, this project) or, with count_empty False, only those with at
least one token (verl's agg_loss leaves fully masked rows out of its sequence mean).
Weights are float64 so the normalizers are exact for any loss dtype.
"""

from __future__ import annotations

import torch
from torch import Tensor


def _rows(keep: Tensor, count_empty: bool = True) -> float | Tensor:
    """B: every row, or (count_empty False) the rows with a token; at least 1."""
    if count_empty:
        return max(keep.shape[0], 1)
    return (keep.sum(-1) > 0).sum().clamp(min=1)


def sequence_weights(mask: Tensor, count_empty: bool = True) -> Tensor:
    """(B, T) m_it / (B max(|o_i|, 1)): GRPO's per-sequence mean as token weights."""
    keep = mask.bool().double()  # (B, T); float64: exact normalizers for any loss dtype
    lengths = keep.sum(-1, keepdim=True).clamp(min=1)  # (B, 1)
    return keep / (lengths * _rows(keep, count_empty))


def sequence_sum_weights(mask: Tensor, count_empty: bool = True) -> Tensor:
    """(B, T) m_it / B: each response's token sum, averaged over responses (verl's
    seq-mean-token-sum, TRL's 'luspo'); a response weighs in proportion to its length."""
    keep = mask.bool().double()  # (B, T)
    return keep / _rows(keep, count_empty)


def sum_weights(mask: Tensor) -> Tensor:
    """(B, T) m_it: the plain token sum (verl's token-sum); the step grows with the batch."""
    return mask.bool().double()


def bnpo_weights(mask: Tensor, rows: int) -> Tensor:
    """(B, T) m_it / (C max(n_c, 1)): the token mean of each micro-batch c of `rows`
    consecutive rows (n_c its tokens), averaged over the C = ceil(B / rows) micro-batches; TRL's
    'bnpo' with per_device_train_batch_size = rows (its loss is divided by the accumulation
    steps, and DDP averages the processes). rows >= B is the token mean."""
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 1:
        raise ValueError(f"rows must be an integer >= 1, got {rows!r}")
    keep = mask.bool().double()  # (B, T)
    b = keep.shape[0]
    chunk = torch.arange(b, device=keep.device) // rows  # (B,) micro-batch of each row
    count = -(-b // rows) if b else 1  # C
    tokens = keep.new_zeros(max(count, 1)).index_add_(0, chunk, keep.sum(-1))  # (C,)
    return keep / (count * tokens.clamp(min=1)[chunk])[:, None]


def token_weights(mask: Tensor) -> Tensor:
    """(B, T) m_it / max(sum_it m_it, 1): DAPO's token mean as token weights."""
    keep = mask.bool().double()  # (B, T)
    return keep / keep.sum().clamp(min=1)


def constant_weights(
    mask: Tensor, max_length: int | None = None, count_empty: bool = True
) -> Tensor:
    """(B, T) m_it / (B L_max), L_max = max_length or the padded width T: Dr. GRPO."""
    keep = mask.bool().double()  # (B, T)
    t = keep.shape[1] if max_length is None else max_length
    return keep / (_rows(keep, count_empty) * max(t, 1))


AGGREGATIONS = ("sequence", "token", "constant", "sequence_sum", "sum", "bnpo")


def aggregation_weights(
    mask: Tensor,
    norm: str,
    *,
    max_length: int | None = None,
    count_empty: bool = True,
    rows: int | None = None,
) -> Tensor:
    """(B, T) the weights of aggregation `norm` (module docstring): max_length is L_max of
    'constant', count_empty whether an empty response counts in B ('sequence',
    'sequence_sum', 'constant'), rows the micro-batch of 'bnpo'."""
    if norm == "sequence":
        return sequence_weights(mask, count_empty)
    if norm == "token":
        return token_weights(mask)
    if norm == "constant":
        return constant_weights(mask, max_length, count_empty)
    if norm == "sequence_sum":
        return sequence_sum_weights(mask, count_empty)
    if norm == "sum":
        return sum_weights(mask)
    if norm == "bnpo":
        if rows is None:
            raise ValueError("the 'bnpo' aggregation needs its micro-batch rows")
        return bnpo_weights(mask, rows)
    raise ValueError(f"unknown aggregation {norm!r}; valid: {', '.join(AGGREGATIONS)}")


def weighted_sum(token_loss: Tensor, weights: Tensor) -> Tensor:
    """sum_it w_it l_it over w != 0 (padding may hold inf/NaN, and NaN * 0 is NaN)."""
    _check_mask(token_loss, weights)
    w = weights.to(token_loss.dtype)  # (B, T)
    return torch.where(weights != 0, token_loss * w, 0.0).sum()


def _check_mask(token_loss: Tensor, mask: Tensor) -> None:
    if token_loss.ndim != 2 or mask.shape != token_loss.shape:
        raise ValueError(
            f"token_loss and mask must be (B, T) of equal shape, got "
            f"{tuple(token_loss.shape)} and {tuple(mask.shape)}"
        )


LAMBDA_H_FLOOR = 1e-3  # h = 1 + r z is floored here so h^lambda is real for every z


def _one_group(mask: Tensor, group_ids: Tensor | None) -> Tensor:
    if group_ids is None:
        return torch.zeros(mask.shape[0], dtype=torch.long, device=mask.device)
    if group_ids.shape != mask.shape[:1]:
        raise ValueError(f"group_ids must be (B,) = {tuple(mask.shape[:1])}")
    return group_ids.to(mask.device)


def lambda_factors(lengths: Tensor, group_ids: Tensor, lam: Tensor | float, r: float) -> Tensor:
    """(B,) lambda-GRPO's response factors f_i = G_g softmax_{j in g}(h_j^lambda)_i (mean 1
    in each group), h_i = max(1 + r z_i, LAMBDA_H_FLOOR), z_i = (|o_i| - mu_g) / sigma_g the
    group-standardized length (population sigma; z = 0 where all lengths are equal, and in a
    singleton). Differentiable in lam (a tensor) for a learnable lambda."""
    n = lengths.double()  # (B,)
    ids, index = torch.unique(group_ids, sorted=True, return_inverse=True)  # (M,), (B,)
    size = n.new_zeros(ids.numel()).index_add_(0, index, torch.ones_like(n))  # (M,)
    mu = n.new_zeros(ids.numel()).index_add_(0, index, n) / size  # (M,)
    dev = n - mu[index]  # (B,)
    sd = (n.new_zeros(ids.numel()).index_add_(0, index, dev * dev) / size).sqrt()  # (M,)
    z = torch.where(sd[index] > 0, dev / sd[index].clamp(min=1e-12), 0.0)  # (B,)
    h = (1.0 + r * z).clamp(min=LAMBDA_H_FLOOR)  # (B,)
    lam_t = torch.as_tensor(lam, dtype=n.dtype, device=n.device)
    g = h**lam_t  # (B,)
    top = n.new_full((ids.numel(),), -torch.inf).scatter_reduce(0, index, g.detach(), "amax")
    e = torch.exp(g - top[index])  # (B,) softmax is shift-invariant: the max is a constant
    total = torch.zeros_like(size, dtype=e.dtype).index_add(0, index, e)  # (M,)
    return size[index] * e / total[index]  # (B,)


def unified_weights(mask: Tensor, factors: Tensor) -> Tensor:
    """(B, T) m_it f_i / max(sum_it m_it, 1): lambda-GRPO's unified aggregation J = (1 / sum_i
    |o_i|) sum_i f_i sum_t l_it for response factors f (B,)."""
    keep = mask.bool().double()  # (B, T)
    return keep * factors.detach().double()[:, None] / keep.sum().clamp(min=1)


def lambda_weights(
    mask: Tensor, group_ids: Tensor | None = None, lam: float = 0.0, r: float = 1 / 9
) -> Tensor:
    """(B, T) unified_weights with lambda-GRPO's f (arXiv 2510.06870). lambda = 0 gives f = 1,
    DAPO's token mean exactly. group_ids None: the rows are one group."""
    lengths = mask.bool().sum(-1)  # (B,)
    return unified_weights(mask, lambda_factors(lengths, _one_group(mask, group_ids), lam, r))


def lambda_objective(
    row_loss: Tensor, mask: Tensor, group_ids: Tensor | None, lam: Tensor, r: float
) -> Tensor:
    """sum_i f_i(lambda) L_i / max(sum_i |o_i|, 1) for fixed per-response token-loss sums L_i
    (B,): the lambda-GRPO loss as a function of lambda alone, whose gradient is lambda's."""
    keep = mask.bool().double()  # (B, T)
    f = lambda_factors(keep.sum(-1), _one_group(mask, group_ids), lam, r)  # (B,)
    return (f * row_loss.detach().double()).sum() / keep.sum().clamp(min=1)
