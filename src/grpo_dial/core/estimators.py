"""The estimator registry: every fix beyond the group advantage, one registered entry each.

As in verl's `register_adv_est`: `@register_estimator(name, ...)` puts a function in one dict
(a duplicate name fails loudly, an unknown one lists the valid names). An entry owns everything
the pipeline knows of its estimator, so a new one touches this module alone:

- its Dial fields (`fields`: name -> core.settings.Setting; the Dial, the config schema's
  `dials` block and the docs read them) and any value it adds to a core field (`choices`, e.g.
  lambda-GRPO's length_norm 'lambda'); `check` refuses a combination of fields in one line;
- `active`: whether a dial uses it; `switch`: the field that switches it on (refusals name it);
- its kind and function:
    advantage: fn(adv, stats, dial, regroup, **needs) -> adv, applied in registration order
               after A_i = (r_i - mean_g) / (sigma_g + eps) ** std_power; stats is the
               batch's core.advantage.GroupStats (stats.rewards the rewards);
               regroup(cell) is that same formula over any finer grouping (N,) of the batch.
    weights:   fn(dial) -> (mask, group_ids=None, lam=None) -> token weights (B, T).
    ratio:     fn(dial) -> (log_ratio (B, T), mask (B, T) | None) -> the log importance ratio
               (B, T) the clipped surrogate uses (GSPO's per-sequence one).
- `needs`: the per-batch inputs the trainer gathers for it (grpo_dial.train.estimator);
- its steps-table columns and `log(dial, inputs, batch) -> {column: value}` (NaN for an arm
  that does not use it), so the training log and the estimators figure follow the registry;
- `backends`: the training engines that express it; any other refuses it by name (`why_not`);
- `preset`: the Dial fields of the recipe named `name`; `label`: its display name
  (core.arm_names, read by the summary and the figure stages).

No torch at import (it is imported inside the functions; numpy comes with the anchor's rule
names), so the DAG build and the dial's checks read the registry without it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from grpo_dial.core.arm_names import add_arm_name, arm_name
from grpo_dial.core.difficulty_anchor import FORMS
from grpo_dial.core.settings import Setting

KINDS = ("advantage", "weights", "ratio")


@dataclass(frozen=True)
class Estimator:
    """One registered estimator: its function and what the rest of the pipeline reads of it."""

    name: str
    label: str  # its display name: core.arm_names' entry
    kind: str  # 'advantage', 'weights' or 'ratio'
    fields: Mapping[str, Setting]  # the Dial fields it owns
    active: Callable[[Any], bool]  # dial -> whether this dial uses it
    function: Callable
    switch: str  # the field that switches it on (named by a backend's refusal)
    choices: Mapping[str, tuple] = field(default_factory=dict)  # values added to core fields
    check: Callable[[Any], str | None] | None = None  # dial -> why its fields clash, or None
    needs: tuple[str, ...] = ()  # per-batch inputs the trainer gathers (train.estimator)
    columns: tuple[str, ...] = ()  # steps-table columns it logs (the estimators figure)
    log: Callable[..., Mapping[str, float]] | None = None  # (dial, inputs, batch) -> columns
    backends: tuple[str, ...] = ("own",)  # the training engines that express it
    why_not: str = ""  # why the others cannot (their refusal line)
    preset: Mapping[str, object] | None = None  # Dial fields of the recipe named `name`


ESTIMATORS: dict[str, Estimator] = {}


def register_estimator(
    name: str,
    *,
    label: str | None = None,
    kind: str,
    fields: Mapping[str, Setting],
    active: Callable[[Any], bool],
    switch: str | None = None,
    choices: Mapping[str, tuple] | None = None,
    check: Callable[[Any], str | None] | None = None,
    needs: tuple[str, ...] = (),
    columns: tuple[str, ...] = (),
    log: Callable[..., Mapping[str, float]] | None = None,
    backends: tuple[str, ...] = ("own",),
    why_not: str = "",
    preset: Mapping[str, object] | None = None,
) -> Callable[[Callable], Callable]:
    """Decorator: register `function` as estimator `name` (a name or field registered twice
    raises); `label`, its display name, goes to core.arm_names (None: the name that table has);
    `switch` defaults to its first field."""
    if kind not in KINDS:
        raise ValueError(f"estimator kind {kind!r} is not valid; choose one of {', '.join(KINDS)}")
    if columns and log is None:
        raise ValueError(f"estimator {name!r} logs columns {columns} but has no log function")

    def decorate(function: Callable) -> Callable:
        if name in ESTIMATORS:
            raise ValueError(f"estimator {name!r} is already registered")
        owned = {f: e.name for e in ESTIMATORS.values() for f in e.fields}
        if clash := [f for f in fields if f in owned]:
            raise ValueError(f"dial field {clash[0]!r} is already owned by {owned[clash[0]]!r}")
        if label is not None:
            add_arm_name(name, label)
        ESTIMATORS[name] = Estimator(
            name=name, label=arm_name(name), kind=kind, fields=dict(fields), active=active,
            function=function, switch=switch or next(iter(fields)), choices=dict(choices or {}),
            check=check, needs=tuple(needs), columns=tuple(columns), log=log,
            backends=tuple(backends), why_not=why_not,
            preset=None if preset is None else dict(preset),
        )  # fmt: skip
        return function

    return decorate


def unregister_estimator(name: str) -> None:
    """Remove estimator `name` (a test's toy, or a plugin withdrawn); unknown names raise."""
    get_estimator(name)
    del ESTIMATORS[name]


def get_estimator(name: str) -> Estimator:
    """The registered estimator `name`; an unknown name lists the valid ones."""
    if name not in ESTIMATORS:
        raise ValueError(f"unknown estimator {name!r}; valid: {', '.join(sorted(ESTIMATORS))}")
    return ESTIMATORS[name]


def active_estimators(dial: Any, kind: str | None = None) -> list[Estimator]:
    """The estimators `dial` uses, in registration order (the order their functions apply)."""
    return [e for e in ESTIMATORS.values() if (kind is None or e.kind == kind) and e.active(dial)]


def log_columns() -> tuple[str, ...]:
    """Every registered estimator's steps-table columns, in registration order."""
    return tuple(c for e in ESTIMATORS.values() for c in e.columns)


def logged_values(dial: Any, inputs: Mapping[str, object], batch: Any) -> dict[str, float]:
    """One step's value of every `log_columns` column: each active estimator's `log` on the
    inputs gathered for it (and `lambda`, the step's lambda), NaN for the others."""
    out = dict.fromkeys(log_columns(), math.nan)
    for est in active_estimators(dial):
        if est.log is not None:
            out.update({c: float(v) for c, v in est.log(dial, inputs, batch).items()})
    return out


def refusal(dial: Any, backend: str) -> tuple[str, str] | None:
    """(field, why) for the first active estimator `backend` cannot express, else None."""
    for est in active_estimators(dial):
        if backend not in est.backends:
            why = est.why_not or f"it has no {est.label}"
            return est.switch, f"{est.switch} = {getattr(dial, est.switch)!r}: {why}"
    return None


# ------------------------------------------------ the engines' estimators (TRL, verl, OpenRLHF)
# Each is one setting of the dial that reproduces an engine's own code (tests/engines). The
# advantage ones apply in this order, before the three fixes below: the lone response, the
# baseline, the batch's std, GPG's rescaling, the whitening.

SINGLETON = ("zero", "reward")
BASELINES = ("mean", "leave_one_out")  # the rloo entry's; opo, passk and none add theirs
WHITEN = ("none", "response", "token")
GPG_COUNTS = ("none", "nonzero_reward", "informative")
WHITEN_EPS = 1e-8  # verl's masked_whiten: (x - mu) / sqrt(var + 1e-8)


def _scale(stats: Any, dial: Any):
    """(N,) s_g of each response's group (core.advantage.group_scale)."""
    from grpo_dial.core.advantage import group_scale

    return group_scale(stats, dial)[stats.index]


def _lengths(lengths: Any, adv: Any, dial: Any, what: str):
    """(N,) float64 response lengths in tokens, checked; `what` names the setting."""
    import torch

    if lengths is None:
        raise ValueError(f"{what} needs the response lengths (N,) = {tuple(adv.shape)}")
    n = torch.as_tensor(lengths).to(device=adv.device, dtype=torch.float64)
    if n.shape != adv.shape or (n < 0).any() or not torch.isfinite(n).all():
        raise ValueError(
            f"{what} needs a length >= 0 per response (N,) = {tuple(adv.shape)}, "
            f"got shape {tuple(n.shape)}"
        )
    return n


@register_estimator(
    "singleton_reward",
    label="lone response keeps its reward",
    kind="advantage",
    fields={
        "singleton": Setting(
            "zero",
            "A group of one response has no baseline. 'zero' (this project, TRL): its advantage "
            "is 0. 'reward' (verl's estimators: mean 0 and std 1 for a group of one): A = r / "
            "(1 + eps)**std_power, plain REINFORCE on that response.",
            choices=SINGLETON,
        ),
    },
    active=lambda dial: dial.singleton == "reward",
    why_not="TRL gives a group of one std 0 and advantage 0",
)  # fmt: skip
def singleton_reward(adv, stats, dial, regroup):
    """verl's lone response: A_i = r_i / (1 + eps)^alpha in a group of one (mean 0, std 1)."""
    import torch

    alone = stats.size[stats.index] == 1  # (N,)
    return torch.where(alone, stats.rewards / (1.0 + dial.eps) ** dial.std_power, adv)


@register_estimator(
    "rloo",
    label="RLOO",
    kind="advantage",
    fields={
        "baseline": Setting(
            "mean",
            "What r_i is compared with before the std: 'mean' (GRPO: the group's mean), "
            "'leave_one_out' (RLOO, arXiv 2402.14740: the mean of the other G-1, = G/(G-1) x "
            "the mean-centred advantage), 'length_weighted' (OPO, arXiv 2505.23585: sum_j "
            "|o_j| r_j / sum_j |o_j|), 'pass_at_k' (verl's grpo_passk, arXiv 2503.19595: only "
            "the best response, r_max - r_second), 'none' (REINFORCE++ without a baseline; "
            "needs std_power 0).",
            choices=BASELINES,
        ),
    },
    active=lambda dial: dial.baseline == "leave_one_out",
    why_not="TRL's GRPOTrainer baselines on the group mean only",
    preset={"baseline": "leave_one_out", "std_power": 0.0},
)  # fmt: skip
def leave_one_out(adv, stats, dial, regroup):
    """RLOO (arXiv 2402.14740; verl 'rloo', OpenRLHF 'rloo'): A_i = (r_i - (k_g - r_i)/(G-1))
    / s_g = G/(G-1) (r_i - mean_g) / s_g in a group of G >= 2; a group of one unchanged."""
    import torch

    g = stats.size[stats.index].to(adv.dtype)  # (N,)
    loo = g / (g - 1).clamp(min=1) * (stats.rewards - stats.mean[stats.index]) / _scale(stats, dial)
    return torch.where(g > 1, loo, adv)


@register_estimator(
    "opo",
    label="OPO",
    kind="advantage",
    fields={},
    switch="baseline",
    choices={"baseline": ("length_weighted",)},
    active=lambda dial: dial.baseline == "length_weighted",
    needs=("lengths",),
    why_not="TRL's GRPOTrainer baselines on the group mean only",
    preset={"baseline": "length_weighted", "std_power": 0.0},
)  # fmt: skip
def length_weighted(adv, stats, dial, regroup, lengths=None):
    """OPO's optimal baseline (arXiv 2505.23585; verl 'opo'): b_g = sum_j |o_j| r_j / sum_j
    |o_j| over the group, A_i = (r_i - b_g) / s_g in a group of G >= 2 (b_g = mean_g where the
    group has no token, or equal rewards); a group of one unchanged. lengths: (N,) |o_i|."""
    import torch

    n = _lengths(lengths, adv, dial, "baseline='length_weighted'")  # (N,)
    m = stats.size.numel()
    num = n.new_zeros(m).index_add_(0, stats.index, n * stats.rewards.double())  # (M,)
    den = n.new_zeros(m).index_add_(0, stats.index, n)  # (M,)
    b = torch.where((den > 0) & (stats.sigma > 0), num / den.clamp(min=1e-300), stats.mean)
    a = (stats.rewards - b[stats.index].to(adv.dtype)) / _scale(stats, dial)  # (N,)
    return torch.where(stats.size[stats.index] > 1, a, adv)


@register_estimator(
    "grpo_passk",
    label="pass@k advantage",
    kind="advantage",
    fields={},
    switch="baseline",
    choices={"baseline": ("pass_at_k",)},
    active=lambda dial: dial.baseline == "pass_at_k",
    why_not="TRL's GRPOTrainer baselines on the group mean only",
    preset={"baseline": "pass_at_k", "std_ddof": 1},
)  # fmt: skip
def pass_at_k(adv, stats, dial, regroup):
    """verl's grpo_passk (arXiv 2503.19595): only a group's unique best response moves,
    A_i = max(r_i - max_{j != i} r_j, 0) / s_g (r_max - r_second for it, 0 for the rest and
    for a tie at the top), in a group of G >= 2; a group of one unchanged."""
    import torch

    r, idx, m = stats.rewards, stats.index, stats.size.numel()
    top = r.new_full((m,), -torch.inf).scatter_reduce(0, idx, r, "amax")  # (M,)
    at_top = r == top[idx]  # (N,)
    ties = torch.zeros(m, dtype=torch.long, device=r.device).index_add_(0, idx, at_top.long())
    rest = torch.where(at_top, -torch.inf, r)  # (N,)
    second = r.new_full((m,), -torch.inf).scatter_reduce(0, idx, rest, "amax")  # (M,)
    other = torch.where(at_top & (ties[idx] == 1), second[idx], top[idx])  # max_{j != i} r_j
    gain = torch.where(stats.size[idx] > 1, (r - other).clamp(min=0), 0.0)  # (N,)
    return torch.where(stats.size[idx] > 1, gain / _scale(stats, dial), adv)


def _no_baseline_clash(dial: Any) -> str | None:
    if dial.baseline == "none" and dial.std_power != 0:
        return "baseline='none' needs std_power 0 (a silent group's reward would be divided by eps)"
    return None


@register_estimator(
    "reinforce_pp",
    label="REINFORCE++",
    kind="advantage",
    fields={},
    switch="baseline",
    choices={"baseline": ("none",)},
    check=_no_baseline_clash,
    active=lambda dial: dial.baseline == "none",
    why_not="TRL's GRPOTrainer baselines on the group mean only",
    preset={"baseline": "none", "std_power": 0.0, "whiten": "token", "std_ddof": 1},
)  # fmt: skip
def no_baseline(adv, stats, dial, regroup):
    """REINFORCE++ (arXiv 2501.03262; verl 'reinforce_plus_plus' at gamma 1, an outcome reward):
    no baseline, A_i = r_i before the whitening (std_power 0)."""
    return stats.rewards / _scale(stats, dial)


@register_estimator(
    "batch_std",
    label="batch std",
    kind="advantage",
    fields={
        "std_scope": Setting(
            "group",
            "Whose std divides A: 'group' (GRPO: sigma_g of the response's group) or 'batch' "
            "(TRL scale_rewards='batch', arXiv 2508.08221: the std of every reward of the "
            "batch, one constant for all groups, so difficulty is weighted as by Dr. GRPO). "
            "std_ddof and eps apply to either; TRL's 'none' is std_power 0.",
            choices=("group", "batch"),
        ),
    },
    active=lambda dial: dial.std_scope == "batch",
    backends=("own", "trl"),
    preset={"std_scope": "batch", "std_ddof": 1, "eps": 1e-4},
)  # fmt: skip
def batch_std(adv, stats, dial, regroup):
    """TRL's scale_rewards='batch': A_i <- A_i s_g / s_B, s_B = (sigma_B + eps)^alpha, sigma_B
    the std (ddof std_ddof) of all N rewards of the batch: A_i = (r_i - b_i) / s_B."""
    import torch

    from grpo_dial.core.std_factor import std_factor

    r = stats.rewards
    n = r.numel()
    sigma = r.std(correction=dial.std_ddof) if n > dial.std_ddof else r.new_zeros(())
    sigma = torch.where(torch.isfinite(sigma), sigma, 0.0)
    return adv * _scale(stats, dial) / std_factor(sigma, dial.eps, dial.std_power)


@register_estimator(
    "gpg",
    label="GPG",
    kind="advantage",
    fields={
        "gpg_scale": Setting(
            "none",
            "GPG's rescaling A <- (B / M) A (arXiv 2504.02546), B the batch's responses: "
            "'nonzero_reward' (verl's 'gpg' estimator: M = responses whose reward is not 0), "
            "'informative' (the paper: M = responses of groups whose rewards are not all "
            "equal, the ones with a gradient), 'none': off.",
            choices=GPG_COUNTS,
        ),
    },
    active=lambda dial: dial.gpg_scale != "none",
    why_not="TRL does not rescale advantages by the informative share of the batch",
    preset={"gpg_scale": "nonzero_reward", "std_power": 0.0},
)  # fmt: skip
def gpg_rescale(adv, stats, dial, regroup):
    """GPG (arXiv 2504.02546; verl 'gpg'): A_i <- (B / max(M, 1)) A_i, M = #{i: r_i != 0}
    (verl) or #{i: sigma_g(i) > 0} (the paper's valid samples)."""
    if dial.gpg_scale == "nonzero_reward":
        m = (stats.rewards != 0).sum()
    else:
        m = (stats.sigma[stats.index] > 0).sum()
    return adv * (adv.numel() / m.clamp(min=1).to(adv.dtype))


@register_estimator(
    "reinforce_pp_baseline",
    label="REINFORCE++ baseline",
    kind="advantage",
    fields={
        "whiten": Setting(
            "none",
            "Whitening of the advantages over the whole batch, after the baseline, the std and "
            "GPG's rescaling (before strata and HA-DW): "
            "A <- (A - mu) / sqrt(var + 1e-8), mu and var (ddof std_ddof) over 'response's or "
            "over 'token's (each response counted |o_i| times: verl's masked_whiten in "
            "reinforce_plus_plus(_baseline), which ties A to length). 'none': off. With it a "
            "silent group's A is -mu / sd, not 0.",
            choices=WHITEN,
        ),
    },
    active=lambda dial: dial.whiten != "none",
    needs=("lengths",),
    why_not="TRL does not whiten advantages over the batch",
    preset={"whiten": "token", "std_power": 0.0, "std_ddof": 1},
)  # fmt: skip
def whiten(adv, stats, dial, regroup, lengths=None):
    """REINFORCE++'s global normalization (arXiv 2501.03262; verl reinforce_plus_plus_baseline
    whitens the group-centred reward over tokens): with weights w_i = 1 ('response') or |o_i|
    ('token'), mu = sum w A / sum w, var = sum w (A - mu)^2 / max(sum w - ddof, 1),
    A <- (A - mu) / sqrt(var + 1e-8). lengths: (N,) |o_i|, for 'token'."""
    import torch

    if dial.whiten == "token":
        w = _lengths(lengths, adv, dial, "whiten='token'")
    else:
        w = torch.ones(adv.shape, dtype=torch.float64, device=adv.device)
    x = adv.double()
    total = w.sum()
    mu = (w * x).sum() / total.clamp(min=1e-300)
    var = (w * (x - mu) ** 2).sum() / (total - dial.std_ddof).clamp(min=1)
    return ((x - mu) / torch.sqrt(var + WHITEN_EPS)).to(adv.dtype)


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


# ------------------------------------------------------------------------ the three fixes


def _lambda_clash(dial: Any) -> str | None:
    if dial.lambda_learnable and dial.length_norm != "lambda":
        return "lambda_learnable needs length_norm='lambda'"
    return None


@register_estimator(
    "lambda_grpo",
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
            "paper's r (arXiv 2510.06870), 0.25 this project's earlier default. |z| <= "
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


def _anchor_log(dial: Any, inputs: Mapping, batch: Any) -> dict[str, float]:
    """C of the step: the batch anchor, or the mean over groups of the prompts' anchors."""
    import torch

    return {"anchor": torch.as_tensor(inputs["anchor"], dtype=torch.float64).mean()}


@register_estimator(
    "hadw_grpo",
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
            "'batch_std' (this project's earlier reading: sigma_t over the last m accuracies).",
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
