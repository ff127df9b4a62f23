"""The engines' advantage estimators (TRL, verl, OpenRLHF), each one registered entry
(core.registry) that is one setting of the dial and reproduces an engine's own code
(tests/engines), and the default baseline and scale slots:

    A_i = (r_i - b_i) / s_i, then the transforms

- baseline slot (what r_i is compared with; default b_i = mean_g, `group_centred`): the
  leave-one-out (RLOO), length-weighted (OPO), pass@k and no baseline (REINFORCE++);
- scale slot (what r_i - b_i is divided by; default (sigma_g + eps) ** std_power,
  `group_scale`): TRL's batch std;
- transforms, in this order and before Stratified GRPO and HA-DW (core.estimators imports this
  module first): GPG's B/M and REINFORCE++'s whitening; GDPO is a recipe of the defaults and
  the whitening.

verl's lone response (singleton 'reward': a group of one has mean 0 and std 1) is a field of the
default slots, which every baseline owner keeps for a group of one. Slot functions get the
batch's core.advantage.GroupStats (stats.rewards: the rewards); no torch at import."""

from __future__ import annotations

from typing import Any

from grpo_dial.core.registry import register_estimator
from grpo_dial.core.settings import Setting
from grpo_dial.core.std_factor import std_factor

SINGLETON = ("zero", "reward")
BASELINES = ("mean", "leave_one_out")  # the rloo entry's; opo, passk and none add theirs
WHITEN = ("none", "response", "token")
GPG_COUNTS = ("none", "nonzero_reward", "informative")
WHITEN_EPS = 1e-8  # verl's masked_whiten: (x - mu) / sqrt(var + 1e-8)


def group_scale(stats: Any, dial: Any):
    """(M,) s_g = (sigma_g + eps) ** std_power (1 where 0), the group formula's divisor; a
    group of one counts sigma = 1 under dial.singleton 'reward' (verl's lone response)."""
    import torch

    sigma = stats.sigma
    if dial.singleton == "reward":
        sigma = torch.where(stats.size == 1, torch.ones_like(sigma), sigma)
    return std_factor(sigma, dial.eps, dial.std_power)  # (M,)


def group_centred(stats: Any, dial: Any):
    """(N,) r_i - mean_g, the default baseline slot's centred reward; exactly 0 in a silent
    group (mean_g is its common value); r_i in a group of one under dial.singleton 'reward'
    (verl's lone response: mean 0)."""
    import torch

    centred = stats.rewards - stats.mean[stats.index]  # (N,)
    if dial.singleton == "reward":
        centred = torch.where(stats.size[stats.index] == 1, stats.rewards, centred)
    return centred


def group_scale_per_response(stats: Any, dial: Any):
    """(N,) s_g of each response's group: the default scale slot (`group_scale`)."""
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
    """verl's lone response: A_i = r_i / (1 + eps)^alpha in a group of one (mean 0, std 1).
    The default slots do the work (`group_centred`: b = 0, `group_scale`: sigma = 1 for a group
    of one), so a baseline or scale owner composes with it; the advantage passes unchanged."""
    return adv


@register_estimator(
    "rloo",
    label="RLOO",
    kind="baseline",
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
def leave_one_out(stats, dial):
    """RLOO's baseline (arXiv 2402.14740; verl 'rloo', OpenRLHF 'rloo'): b_i = (k_g - r_i)/(G-1),
    the mean of the other G-1, so r_i - b_i = G/(G-1) (r_i - mean_g) in a group of G >= 2; a
    group of one keeps the default (`group_centred`)."""
    import torch

    r = stats.rewards
    g = stats.size[stats.index].to(r.dtype)  # (N,)
    loo = g / (g - 1).clamp(min=1) * (r - stats.mean[stats.index])  # (N,)
    return torch.where(g > 1, loo, group_centred(stats, dial))


@register_estimator(
    "opo",
    label="OPO",
    kind="baseline",
    fields={},
    switch="baseline",
    choices={"baseline": ("length_weighted",)},
    active=lambda dial: dial.baseline == "length_weighted",
    needs=("lengths",),
    why_not="TRL's GRPOTrainer baselines on the group mean only",
    preset={"baseline": "length_weighted", "std_power": 0.0},
)  # fmt: skip
def length_weighted(stats, dial, lengths=None):
    """OPO's optimal baseline (arXiv 2505.23585; verl 'opo'): b_g = sum_j |o_j| r_j / sum_j
    |o_j| over the group, r_i - b_g in a group of G >= 2 (b_g = mean_g where the group has no
    token, or equal rewards); a group of one keeps the default (`group_centred`).
    lengths: (N,) |o_i|."""
    import torch

    r = stats.rewards
    n = _lengths(lengths, r, dial, "baseline='length_weighted'")  # (N,)
    m = stats.size.numel()
    num = n.new_zeros(m).index_add_(0, stats.index, n * r.double())  # (M,)
    den = n.new_zeros(m).index_add_(0, stats.index, n)  # (M,)
    b = torch.where((den > 0) & (stats.sigma > 0), num / den.clamp(min=1e-300), stats.mean)
    centred = r - b[stats.index].to(r.dtype)  # (N,)
    return torch.where(stats.size[stats.index] > 1, centred, group_centred(stats, dial))


@register_estimator(
    "grpo_passk",
    label="pass@k advantage",
    kind="baseline",
    fields={},
    switch="baseline",
    choices={"baseline": ("pass_at_k",)},
    active=lambda dial: dial.baseline == "pass_at_k",
    why_not="TRL's GRPOTrainer baselines on the group mean only",
    preset={"baseline": "pass_at_k", "std_ddof": 1},
)  # fmt: skip
def pass_at_k(stats, dial):
    """verl's grpo_passk (arXiv 2503.19595): only a group's unique best response moves,
    b_i = min(r_i, max_{j != i} r_j), so r_i - b_i = max(r_i - max_{j != i} r_j, 0)
    (r_max - r_second for it, 0 for the rest and for a tie at the top), in a group of G >= 2;
    a group of one keeps the default (`group_centred`)."""
    import torch

    r, idx, m = stats.rewards, stats.index, stats.size.numel()
    top = r.new_full((m,), -torch.inf).scatter_reduce(0, idx, r, "amax")  # (M,)
    at_top = r == top[idx]  # (N,)
    ties = torch.zeros(m, dtype=torch.long, device=r.device).index_add_(0, idx, at_top.long())
    rest = torch.where(at_top, -torch.inf, r)  # (N,)
    second = r.new_full((m,), -torch.inf).scatter_reduce(0, idx, rest, "amax")  # (M,)
    other = torch.where(at_top & (ties[idx] == 1), second[idx], top[idx])  # max_{j != i} r_j
    gain = (r - other).clamp(min=0)  # (N,)
    return torch.where(stats.size[idx] > 1, gain, group_centred(stats, dial))


def _no_baseline_clash(dial: Any) -> str | None:
    if dial.baseline == "none" and dial.std_power != 0:
        return "baseline='none' needs std_power 0 (a silent group's reward would be divided by eps)"
    return None


@register_estimator(
    "reinforce_pp",
    label="REINFORCE++",
    kind="baseline",
    fields={},
    switch="baseline",
    choices={"baseline": ("none",)},
    check=_no_baseline_clash,
    active=lambda dial: dial.baseline == "none",
    why_not="TRL's GRPOTrainer baselines on the group mean only",
    preset={"baseline": "none", "std_power": 0.0, "whiten": "token", "std_ddof": 1},
)  # fmt: skip
def no_baseline(stats, dial):
    """REINFORCE++ (arXiv 2501.03262; verl 'reinforce_plus_plus' at gamma 1, an outcome reward):
    no baseline, b_i = 0, so A_i = r_i before the whitening (std_power 0)."""
    return stats.rewards


@register_estimator(
    "batch_std",
    label="batch std",
    kind="scale",
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
def batch_std(stats, dial):
    """TRL's scale_rewards='batch': s_i = s_B = (sigma_B + eps)^alpha (1 where that is 0) for
    every response, sigma_B the std (ddof std_ddof) of all N rewards of the batch, so
    A_i = (r_i - b_i) / s_B."""
    import torch

    r = stats.rewards
    n = r.numel()
    sigma = r.std(correction=dial.std_ddof) if n > dial.std_ddof else r.new_zeros(())
    sigma = torch.where(torch.isfinite(sigma), sigma, 0.0)
    return std_factor(sigma, dial.eps, dial.std_power).expand(n)  # (N,)


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


@register_estimator(
    "gdpo",
    label="GDPO (one reward)",
    kind="advantage",
    fields={},
    switch="whiten",
    active=lambda dial: dial.whiten == "token" and dial.std_power > 0,  # GRPO's A, whitened
    why_not="TRL does not whiten advantages over the batch",
    preset={"std_ddof": 1, "eps": 1e-6, "singleton": "reward", "whiten": "token"},
)  # fmt: skip
def gdpo(adv, stats, dial, regroup):
    """verl's gdpo (arXiv 2601.05242) with one reward: GRPO's group advantage (sample std, eps
    1e-6, a lone response mean 0 and std 1), then whitened over the batch's tokens. With several
    reward components it normalizes each in its group before a weighted sum, which one reward
    per response (the dial's) cannot express. A recipe: the group formula and the whitening do
    the work, so the advantage passes unchanged."""
    return adv
