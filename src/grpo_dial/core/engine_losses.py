"""The engines' loss settings, each one registered entry (core.registry): GSPO's
per-sequence importance ratio (TRL importance_sampling_level 'sequence', verl loss_mode 'gspo')
and the aggregations verl and TRL have beyond GRPO / DAPO / Dr. GRPO's: LUSPO's sequence sum
(TRL 'luspo', verl seq-mean-token-sum), verl's token-sum, TRL's 'bnpo' (the token mean per
micro-batch) and verl's rule that an empty response does not count in B. Their token weights
are core.token_weights.aggregation_weights; no torch at import."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from grpo_dial.core.registry import register_estimator
from grpo_dial.core.settings import Setting


def _gspo_clash(dial: Any) -> str | None:
    if dial.ratio_level == "sequence" and dial.lambda_learnable:
        return "ratio_level='sequence' takes no learnable lambda (its loss sums use token ratios)"
    return None


@register_estimator(
    "gspo",
    label="GSPO",
    kind="ratio",
    fields={
        "ratio_level": Setting(
            "token",
            "The PPO importance ratio: per 'token' (PPO, GRPO) or per 'sequence' (GSPO, arXiv "
            "2507.18071; TRL importance_sampling_level='sequence', verl loss_mode 'gspo'): s_i = "
            "exp(mean_t log(pi/pi_old)) on every token of response i, clipped at [1 - clip_low, "
            "1 + clip_high] (GSPO's range is 3e-4 / 4e-4, not 0.2). The same gradient as "
            "'token' on the first update of a batch (ratio 1).",
            choices=("token", "sequence"),
        ),
    },
    active=lambda dial: dial.ratio_level == "sequence",
    check=_gspo_clash,
    backends=("own", "trl"),
    preset={"ratio_level": "sequence", "clip_low": 3e-4, "clip_high": 4e-4},
)  # fmt: skip
def sequence_ratio(dial: Any) -> Callable:
    """GSPO (arXiv 2507.18071): log s_i = sum_t m_it log(pi/pi_old)_it / max(|o_i|, 1), the
    same on every token of row i (TRL's (B, 1) ratio broadcast; verl's GSPO-token has the same
    value and gradient)."""
    import torch

    def log_ratio(per_token, mask=None):
        if mask is None:
            raise ValueError("ratio_level='sequence' needs the response mask (B, T)")
        keep = mask.bool()  # (B, T)
        total = torch.where(keep, per_token, 0.0).sum(-1)  # (B,) NaN-safe on padding
        seq = total / keep.sum(-1).clamp(min=1).to(per_token.dtype)  # (B,)
        return seq[:, None].expand_as(per_token)

    return log_ratio


def _aggregation(dial: Any) -> Callable:
    """The dial's token weights for the core normalizers and the engines' (core.token_weights
    .aggregation_weights), reading length_norm, max_length, empty_rows and bnpo_rows."""
    from functools import partial

    from grpo_dial.core.token_weights import aggregation_weights

    weigh = partial(
        aggregation_weights, norm=dial.length_norm, max_length=dial.max_length,
        count_empty=dial.empty_rows == "count", rows=dial.bnpo_rows,
    )  # fmt: skip
    return lambda mask, group_ids=None, lam=None: weigh(mask)


@register_estimator(
    "luspo",
    label="LUSPO",
    kind="weights",
    fields={},
    switch="length_norm",
    choices={"length_norm": ("sequence_sum",)},
    active=lambda dial: dial.length_norm == "sequence_sum",
    backends=("own", "trl"),
    preset={"length_norm": "sequence_sum", "ratio_level": "sequence"},
)  # fmt: skip
def sequence_sum(dial: Any) -> Callable:
    """LUSPO (TRL loss_type 'luspo'; verl seq-mean-token-sum): sum_it m_it l_it / B, each
    response's token sum averaged over responses, so a response weighs by its length."""
    return _aggregation(dial)


@register_estimator(
    "token_sum",
    label="token sum",
    kind="weights",
    fields={},
    switch="length_norm",
    choices={"length_norm": ("sum",)},
    active=lambda dial: dial.length_norm == "sum",
    why_not="TRL has no token-sum loss_type",
)  # fmt: skip
def token_sum(dial: Any) -> Callable:
    """verl's token-sum: sum_it m_it l_it, no normalizer (the step grows with the batch)."""
    return _aggregation(dial)


@register_estimator(
    "bnpo",
    label="BNPO",
    kind="weights",
    fields={
        "bnpo_rows": Setting(
            8,
            "R of length_norm='bnpo' (TRL loss_type 'bnpo'): the token mean is taken within "
            "each micro-batch of R consecutive rows, then averaged over micro-batches; R is "
            "TRL's per_device_train_batch_size (its default 8; TRL shuffles the rows before "
            "splitting). R >= the batch is DAPO's token mean.",
            kind=int, low=1,
        ),
    },
    switch="length_norm",
    choices={"length_norm": ("bnpo",)},
    active=lambda dial: dial.length_norm == "bnpo",
    backends=("own", "trl"),
    preset={"length_norm": "bnpo"},
)  # fmt: skip
def micro_batch_token_mean(dial: Any) -> Callable:
    """TRL's bnpo: sum_it m_it l_it / (C n_c(i)), the token mean of each micro-batch c of
    bnpo_rows rows averaged over the C micro-batches (core.token_weights.bnpo_weights)."""
    return _aggregation(dial)


@register_estimator(
    "verl_rows",
    label="empty responses out of B",
    kind="weights",
    fields={
        "empty_rows": Setting(
            "count",
            "Whether a response with no token counts in B of the 'sequence', 'sequence_sum' "
            "and 'constant' normalizers: 'count' (TRL, this project) or 'skip' (verl's agg_loss "
            "averages over the sequences with a token). No effect on the token means.",
            choices=("count", "skip"),
        ),
    },
    active=lambda dial: dial.empty_rows == "skip"
    and dial.length_norm in ("sequence", "sequence_sum", "constant"),
    why_not="TRL counts every response in B",
)  # fmt: skip
def skip_empty_rows(dial: Any) -> Callable:
    """verl's agg_loss: B = the responses with at least one token."""
    return _aggregation(dial)
