"""The estimator registry's entries: every estimator beyond the group advantage, one
registered entry each (core.registry, the machinery: `register_estimator`, `ESTIMATORS`, ...;
read it through this module, which registers them all). An entry owns everything the pipeline
knows of its estimator (fields, check, needs, columns and log, backends, preset, label), so a new
one touches one module. The advantage is A_i = (r_i - b_i) / s_i, the baseline b and the scale s
each from its slot's one active owner (or the group's default, `DEFAULT_SLOTS`), then the
'advantage' transforms in registration order (core.registry states the contract). Registered,
in this order:

- the engines' advantage estimators (core.engine_estimators: verl's lone response; the baseline
  slot's RLOO, OPO, pass@k and REINFORCE++; the scale slot's TRL batch std; the transforms GPG
  and the whitening) and loss settings (core.engine_losses: GSPO's sequence ratio, LUSPO,
  token-sum, BNPO, verl's empty rows);
- the essay's three fixes, here: lambda-GRPO's learnable length preference, Stratified GRPO
  and HA-DW's history-aware difficulty anchor.

No torch at import (it is imported inside the functions; numpy comes with the anchor's rule
names), so the DAG build and the dial's checks read the registry without it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from grpo_dial.core import engine_estimators, engine_losses
from grpo_dial.core.difficulty_anchor import FORMS
from grpo_dial.core.registry import (
    ADVANTAGE_KINDS,
    ESTIMATORS,
    KINDS,
    SLOTS,
    Estimator,
    active_estimators,
    advantage_estimators,
    column_labels,
    get_estimator,
    log_columns,
    logged_values,
    refusal,
    register_estimator,
    slot_clash,
    slot_owner,
    unregister_estimator,
)
from grpo_dial.core.settings import Setting

ENGINES = (engine_estimators, engine_losses)  # registered before the three fixes below
# what a slot with no active owner computes: the group mean and the group's std factor
DEFAULT_SLOTS: Mapping[str, Callable] = {
    "baseline": engine_estimators.group_centred,
    "scale": engine_estimators.group_scale_per_response,
}
__all__ = [
    "ADVANTAGE_KINDS", "DEFAULT_SLOTS", "ESTIMATORS", "KINDS", "SLOTS", "Estimator",
    "active_estimators", "advantage_estimators", "column_labels", "get_estimator", "log_columns",
    "logged_values", "refusal", "register_estimator", "slot_clash", "slot_owner",
    "unregister_estimator",
]  # fmt: skip


# ------------------------------------------------------------------------ the three fixes


def _lambda_clash(dial: Any) -> str | None:
    if dial.lambda_learnable and dial.length_norm != "lambda":
        return "lambda_learnable needs length_norm='lambda'"
    return None


@register_estimator(
    "lambda_grpo",
    label="lambda-GRPO (learnable)",
    kind="weights",
    fields={
        "lambda_value": Setting(
            0.0,
            "lambda of length_norm='lambda': fixed, or the start when lambda_learnable. 0 is "
            "exactly DAPO's token mean; > 0 weights responses longer than their group's mean up, "
            "< 0 down.",
            kind=float,
        ),
        "lambda_learnable": Setting(
            False,
            "lambda-GRPO: lambda is a scalar parameter trained with the policy (its own learning "
            "rate lambda_lr, same optimizer), logged per step; false keeps lambda_value fixed.",
            kind=bool,
        ),
        "lambda_r": Setting(
            1 / 9,
            "r > 0 of lambda-GRPO's lift h = 1 + r z of the standardized length z; 1/9 is the "
            "paper's r (arXiv 2510.06870); a larger r leans harder on length. |z| <= "
            "sqrt(G - 1) in a group of G, so r < 1/sqrt(G - 1) keeps h > 0 (1/9: G <= 81); a "
            "smaller h is floored at 1e-3.",
            kind=float, low=0.0, low_open=True,
        ),
        "lambda_lr": Setting(
            0.01,
            "Learning rate of a learnable lambda (AdamW moves it by about this much per update).",
            kind=float, low=0.0, low_open=True,
        ),
    },
    choices={"length_norm": ("lambda",)},
    switch="length_norm",
    check=_lambda_clash,
    active=lambda dial: dial.length_norm == "lambda",
    columns=("lambda",),
    log=lambda dial, inputs, batch: {"lambda": inputs["lambda"]},
    why_not="TRL has no length-weighted token mean",
    preset={"length_norm": "lambda", "lambda_learnable": True},
)  # fmt: skip
def lambda_token_weights(dial: Any) -> Callable:
    """lambda-GRPO (arXiv 2510.06870): the token mean with each response weighted by a softmax
    of its group-standardized length to the power lambda (core.token_weights.lambda_weights);
    lam: the learnable lambda of this step (None: dial.lambda_value)."""
    import torch

    from grpo_dial.core.token_weights import lambda_weights

    def weights(mask, group_ids=None, lam=None):
        value = dial.lambda_value if lam is None else float(torch.as_tensor(lam).detach())
        return lambda_weights(mask, group_ids, value, dial.lambda_r)

    return weights


def _strata_log(dial: Any, inputs: Mapping, batch: Any) -> dict[str, float]:
    """The batch's (group, stratum) cells and the groups split into more than one stratum."""
    import torch

    strata = inputs["strata"]
    if not len(strata):
        return {"strata_cells": math.nan, "strata_split_groups": math.nan}
    cells = torch.unique(torch.stack([batch.group_ids, strata.to(batch.group_ids)]), dim=1)
    per_group = torch.unique(cells[0], return_counts=True)[1]  # (M,) strata in each group
    return {"strata_cells": cells.shape[1], "strata_split_groups": (per_group > 1).sum()}


@register_estimator(
    "stratified_grpo",
    label="Stratified GRPO",
    kind="advantage",
    fields={
        "strata": Setting(
            None,
            "Stratified advantage normalization (Stratified GRPO, arXiv 2510.06214): a stratum "
            "key per response; advantages are computed within each stratum of a group. "
            "'truncated' and 'length_bucket' (above the group's mean length) exist for every "
            "task; a task may add its own (the arithmetic task with tail_checks > 0: "
            "'check_lines'). None: off.",
            kind=str, nullable=True,
        ),
        "strata_blend": Setting(
            1.0,
            "beta in [0,1]: A = beta A_stratum + (1 - beta) A_group; 1 = pure stratified "
            "normalization, 0 = the group estimator. The paper blends for finite-sample "
            "stability.",
            kind=float, low=0.0, high=1.0,
        ),
    },
    active=lambda dial: dial.strata is not None,
    needs=("strata",),
    columns=("strata_cells", "strata_split_groups"),
    log=_strata_log,
    why_not="TRL normalizes within whole groups only",
    preset={"strata": "truncated", "strata_blend": 0.5},
)  # fmt: skip
def stratified(adv, stats, dial, regroup, strata=None):
    """Stratified GRPO (arXiv 2510.06214): A <- beta A^(s) + (1 - beta) A, A^(s) = (r_i - b_i)
    / s_i with the dial's own baseline and scale slots over the cells (group, stratum): the
    response's stratum of its group is its group there. strata: (N,) integer per response."""
    import torch

    if strata is None or strata.shape != adv.shape or strata.is_floating_point():
        raise ValueError(
            f"dial.strata={dial.strata!r} needs an integer stratum per response (N,) = "
            f"{tuple(adv.shape)}, got {None if strata is None else tuple(strata.shape)}"
        )
    pairs = torch.stack([stats.index, strata.to(stats.index)])  # (2, N)
    cell = torch.unique(pairs, dim=1, return_inverse=True)[1]  # (N,) (group, stratum) number
    beta = dial.strata_blend
    return beta * regroup(cell) + (1 - beta) * adv


def hadw_weights(adv, p_hat, anchor, scale: float = 1.0):
    """(N,) HA-DW's Phi_i = scale exp(D_i M) = scale exp(-sgn(A_i) (p_hat_i - C_i)), with
    D_i = -sgn(A_i) sgn(p_hat - C), M = |p_hat - C| (arXiv 2601.08521 as TRL PR #4872 states
    it): on a prompt harder than the anchor (p_hat < C) positive advantages grow by e^M and
    negative ones shrink by e^-M; on an easier one the reverse. p_hat, C: (N,) per response."""
    import torch

    return scale * torch.exp(-torch.sign(adv) * (p_hat - anchor))


def _anchor_log(dial: Any, inputs: Mapping, batch: Any) -> dict[str, float]:
    """C of the step: the batch anchor, or the mean over groups of the prompts' anchors."""
    import torch

    return {"anchor": torch.as_tensor(inputs["anchor"], dtype=torch.float64).mean()}


@register_estimator(
    "hadw_grpo",
    label="HA-DW, Eq. 10 anchor",
    kind="advantage",
    fields={
        "anchor": Setting(
            "none",
            "HA-DW (arXiv 2601.08521): reweight A by Phi = anchor_scale exp(-sgn(A)(p_hat - C)), "
            "boosting correct answers on prompts harder than the anchor C. 'batch': C is the "
            "paper's cross-batch anchor of the policy's accuracy; 'prompt': C is the prompt's "
            "running pass rate (the adaptive arm's tracker). 'none': off.",
            choices=("none", "batch", "prompt"),
        ),
        "anchor_update": Setting(
            "paper",
            "How the batch anchor follows the accuracy (core.difficulty_anchor): 'paper' (Eqs. "
            "8-11: eta_t = eta sigma_t, sigma_t the std of the previous m beliefs, the running "
            "mean of the accuracies as warm-up for the first m steps), 'released' (the authors' "
            "code: the mean of the last m batch accuracies, the current one included), "
            "'batch_std' (sigma_t the std of the last m accuracies instead of the beliefs).",
            choices=FORMS,
        ),
        "anchor_rate": Setting(
            0.1,
            "eta in (0, 1] of the batch anchor's update C <- (1 - eta_t) C + eta_t y_t, eta_t = "
            "eta sigma_t ('paper', 'batch_std'; unused by 'released').",
            kind=float, low=0.0, low_open=True, high=1.0,
        ),
        "anchor_scale": Setting(
            1.5,
            "lambda_scale > 0 of HA-DW's Phi: 1.5, the paper's best (its Table 7: 48.7 at "
            "1.3-1.5 against 47.4 at 1.0) and the value the authors' code hard-codes; 1.0 is the "
            "unscaled Phi.",
            kind=float, low=0.0, low_open=True,
        ),
        "anchor_window": Setting(
            8,
            "m >= 2: the beliefs in sigma_t ('paper'), the batch accuracies averaged "
            "('released', 10 in the authors' code) or in sigma_t ('batch_std').",
            kind=int, low=2,
        ),
    },
    active=lambda dial: dial.anchor != "none",
    needs=("anchor",),
    columns=("anchor",),
    log=_anchor_log,
    why_not="TRL keeps no difficulty anchor between steps",
    preset={"anchor": "batch"},
)  # fmt: skip
def hadw(adv, stats, dial, regroup, anchor=None):
    """HA-DW (arXiv 2601.08521): A <- Phi A, Phi = s exp(-sgn(r - mean_g)(p_hat_g - C_g));
    p_hat_g = mean_g, the group's accuracy. anchor: C, a float or (M,) per group (sorted ids).
    The sign is the mean-centred reward's (the paper's, and the released code's r_i - mean_g;
    0 in silent groups and groups of one), not the incoming A's, which strata or a baseline
    slot can flip."""
    import torch

    if anchor is None:
        raise ValueError(f"dial.anchor={dial.anchor!r} needs the difficulty anchor C")
    c = torch.as_tensor(anchor, dtype=adv.dtype, device=adv.device)
    if c.ndim == 1 and c.shape != stats.mean.shape:
        raise ValueError(f"anchor must be a float or (M,) = {tuple(stats.mean.shape)}")
    c = c[stats.index] if c.ndim == 1 else c.expand_as(adv)  # (N,)
    centred = stats.rewards - stats.mean[stats.index]  # (N,) exactly 0 in silent groups
    return adv * hadw_weights(centred, stats.mean[stats.index], c, dial.anchor_scale)
