"""The estimator registry: every fix beyond the group advantage, one registered function each.

As in verl's `register_adv_est`: `@register_estimator(name, ...)` puts a function in one dict
(a duplicate name fails loudly, an unknown one lists the valid names). An estimator owns some
Dial fields, is `active` on a dial when those fields say so, and is one of two kinds:

    advantage: fn(adv, stats, dial, regroup, **needs) -> adv, applied in registration order
               after A_i = (r_i - mean_g) / (sigma_g + eps) ** std_power;
               regroup(cell) is that same formula over any finer grouping (N,) of the batch.
    weights:   fn(dial) -> (mask, group_ids=None, lam=None) -> token weights (B, T).

What reads the registry: the Dial's presets (`preset`: the recipe of the same name), the config
schema (the preset enum), the trainer's context gathering (`needs`: the inputs it gathers per
batch, grpo_dial.train.estimator), the DAG (`columns`: what the steps table logs, so the
estimators figure is drawn) and the arms' display names (`label`, added to
grpo_dial.core.arm_names, which the summary and the figures read). Adding a variant is its Dial
fields plus one registered function here.

Standard library at import: torch is imported inside the functions, so the DAG build and the
dial's checks read the registry without it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from grpo_dial.core.arm_names import add_arm_name, arm_name

KINDS = ("advantage", "weights")


@dataclass(frozen=True)
class Estimator:
    """One registered estimator: its function and what the rest of the pipeline reads of it."""

    name: str
    label: str  # its display name: core.arm_names' entry
    kind: str  # 'advantage' or 'weights'
    fields: tuple[str, ...]  # the Dial fields it owns
    active: Callable[[Any], bool]  # dial -> whether this dial uses it
    function: Callable
    needs: tuple[str, ...] = ()  # per-batch inputs the trainer gathers (train.estimator)
    columns: tuple[str, ...] = ()  # steps-table columns it logs (the estimators figure)
    preset: Mapping[str, object] | None = None  # Dial fields of the recipe named `name`


ESTIMATORS: dict[str, Estimator] = {}


def register_estimator(
    name: str,
    *,
    label: str | None = None,
    kind: str,
    fields: tuple[str, ...],
    active: Callable[[Any], bool],
    needs: tuple[str, ...] = (),
    columns: tuple[str, ...] = (),
    preset: Mapping[str, object] | None = None,
) -> Callable[[Callable], Callable]:
    """Decorator: register `function` as estimator `name` (a name registered twice raises);
    `label`, its display name, goes to core.arm_names (None: the name that table has)."""
    if kind not in KINDS:
        raise ValueError(f"estimator kind {kind!r} is not valid; choose one of {', '.join(KINDS)}")

    def decorate(function: Callable) -> Callable:
        if name in ESTIMATORS:
            raise ValueError(f"estimator {name!r} is already registered")
        if label is not None:
            add_arm_name(name, label)
        ESTIMATORS[name] = Estimator(
            name, arm_name(name), kind, tuple(fields), active, function, tuple(needs),
            tuple(columns), None if preset is None else dict(preset),
        )  # fmt: skip
        return function

    return decorate


def get_estimator(name: str) -> Estimator:
    """The registered estimator `name`; an unknown name lists the valid ones."""
    if name not in ESTIMATORS:
        raise ValueError(f"unknown estimator {name!r}; valid: {', '.join(sorted(ESTIMATORS))}")
    return ESTIMATORS[name]


def active_estimators(dial: Any, kind: str | None = None) -> list[Estimator]:
    """The estimators `dial` uses, in registration order (the order their functions apply)."""
    return [
        e for e in ESTIMATORS.values() if (kind is None or e.kind == kind) and e.active(dial)
    ]


# ------------------------------------------------------------------------ the three fixes


@register_estimator(
    "lambda_grpo",
    kind="weights",
    fields=("length_norm", "lambda_value", "lambda_learnable", "lambda_r", "lambda_lr"),
    active=lambda dial: dial.length_norm == "lambda",
    columns=("lambda",),
    preset={"length_norm": "lambda", "lambda_learnable": True},
)
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


@register_estimator(
    "stratified_grpo",
    kind="advantage",
    fields=("strata", "strata_blend"),
    active=lambda dial: dial.strata is not None,
    needs=("strata",),
    columns=("strata_split_groups",),
    preset={"strata": "truncated", "strata_blend": 0.5},
)
def stratified(adv, stats, dial, regroup, strata=None):
    """Stratified GRPO (arXiv 2510.06214): A <- beta A^(s) + (1 - beta) A, A^(s) the group
    formula within the response's stratum of its group. strata: (N,) integer per response."""
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


@register_estimator(
    "hadw_grpo",
    kind="advantage",
    fields=("anchor", "anchor_update", "anchor_rate", "anchor_scale", "anchor_window"),
    active=lambda dial: dial.anchor != "none",
    needs=("anchor",),
    columns=("anchor",),
    preset={"anchor": "batch"},
)
def hadw(adv, stats, dial, regroup, anchor=None):
    """HA-DW (arXiv 2601.08521): A <- Phi A, Phi = s exp(-sgn(r - mean_g)(p_hat_g - C_g));
    p_hat_g = mean_g, the group's accuracy. anchor: C, a float or (M,) per group (sorted ids).
    The sign is the group advantage's of the raw rewards (the paper's, and the released code's
    r_i - mean_g), not the incoming A's, which strata can flip."""
    import torch

    if anchor is None:
        raise ValueError(f"dial.anchor={dial.anchor!r} needs the difficulty anchor C")
    c = torch.as_tensor(anchor, dtype=adv.dtype, device=adv.device)
    if c.ndim == 1 and c.shape != stats.mean.shape:
        raise ValueError(f"anchor must be a float or (M,) = {tuple(stats.mean.shape)}")
    c = c[stats.index] if c.ndim == 1 else c.expand_as(adv)  # (N,)
    group_adv = regroup(stats.index)  # (N,) same sign as r - mean_g (0 in silent groups)
    return adv * hadw_weights(group_adv, stats.mean[stats.index], c, dial.anchor_scale)
