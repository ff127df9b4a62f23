"""Every engine's estimator on one dial, in closed form: the expected gradient mass one prompt
of pass rate p receives, m(p) = E[(1/G) sum_i A_i (r_i - p)] (the update of a Bernoulli-logit
prompt, score r - p, per unit learning rate), for binary rewards and k ~ Binomial(G, p), with
the batch's constants at their large-batch limits; and which estimators are Dr. GRPO's
operation up to a per-batch constant (SAME_OPERATION). numpy/scipy only; tested against a
Monte Carlo through the dial's own advantages (tests/core/test_estimator_mass.py).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy.stats import binom

from grpo_dial.core.checks import check_choice, check_int


def _prob(x: ArrayLike, name: str) -> np.ndarray:
    try:
        a = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be numeric, got {x!r}") from None
    if np.isnan(a).any() or ((a < 0) | (a > 1)).any():
        raise ValueError(f"{name} must lie in [0, 1] (no NaN)")
    return a


MASS_ESTIMATORS = (
    "grpo", "dr_grpo", "rloo", "opo", "grpo_passk", "batch_std", "gpg", "gpg_paper",
    "reinforce_pp_baseline", "reinforce_pp",
)  # fmt: skip
# estimator -> its relation to Dr. GRPO's advantage A = r - mean_g (docs/estimators.md)
SAME_OPERATION = {
    "dr_grpo": "itself",
    "rloo": "x G/(G-1) in every group (one constant at a fixed G)",
    "batch_std": "x 1/(sigma_B + eps), one constant per batch",
    "gpg": "x B/M, one constant per batch",
    "gpg_paper": "x B/M, one constant per batch",
    "reinforce_pp_baseline": "x 1/sd, one constant per batch, when whitened over responses "
    "(over tokens: minus a length-weighted mean, which ties A to length)",
    "opo": "in expectation over lengths independent of correctness; the baseline ties A to length",
    "grpo": "no: x 1/(sigma_g + eps), a weight per group (per difficulty)",
    "grpo_passk": "no: only a group's unique best response moves",
    "reinforce_pp": "no: a batch baseline, silent groups move (by -mu/sd)",
}
# the estimators whose advantage is Dr. GRPO's times one constant per batch (at one G per batch);
# reinforce_pp_baseline_response: the REINFORCE++ baseline whitened over responses
EXACT_RESCALINGS = frozenset(
    {"dr_grpo", "rloo", "batch_std", "gpg", "gpg_paper", "reinforce_pp_baseline_response"}
)


def estimator_mass(
    p: ArrayLike,
    G: int,
    estimator: str,
    batch_p: ArrayLike | None = None,
    std_power: float = 1.0,
    ddof: int = 0,
    eps: float = 0.0,
) -> np.ndarray:
    """Expected gradient mass of one prompt at pass rate p: m(p) = E[(1/G) sum_i A_i (r_i - p)],
    the update of a Bernoulli-logit prompt (score r - p) per unit learning rate, over
    k ~ Binomial(G, p), binary rewards, sigma_k = sqrt(k(G-k))/G:

        grpo          E[sigma_k^2 / (sigma_d,k + eps)^alpha]          (std_power, ddof, eps)
        dr_grpo       E[sigma_k^2] = p(1-p)(1 - 1/G)
        rloo          G/(G-1) x dr_grpo = p(1-p)
        opo           dr_grpo (E[b | k] = k/G when lengths do not depend on correctness)
        grpo_passk    p (1-p)^G / (sigma_d,1 + eps)^alpha             (k = 1 moves, by 1 - p)
        batch_std     dr_grpo / (sigma_B + eps)^alpha, sigma_B^2 = pbar (1 - pbar)
        gpg           dr_grpo / pbar                (verl: B/M, M -> B pbar nonzero rewards)
        gpg_paper     dr_grpo / (1 - mean_j silent(p_j))         (M -> the informative share)
        reinforce_pp_baseline  dr_grpo / sqrt(v + 1e-8), v = mean_j p_j(1-p_j)(1 - 1/G)
        reinforce_pp  p(1-p) / sqrt(pbar(1-pbar) + 1e-8)      (no baseline; batch whitening)

    The batch terms are their large-batch limits over the batch's pass rates batch_p (default:
    the p of this call), pbar their mean. Broadcasts over p; G a scalar >= 1."""
    check_choice("estimator", estimator, MASS_ESTIMATORS)
    p = _prob(p, "p")
    g = check_int("G", G, 1)
    batch = p.ravel() if batch_p is None else _prob(batch_p, "batch_p").ravel()
    if batch.size == 0:
        raise ValueError("batch_p must hold at least one pass rate")
    pbar = float(batch.mean())
    dr = p * (1 - p) * (1 - 1 / g)
    if estimator == "grpo":
        k = np.arange(g + 1)
        sig2 = k * (g - k) / g**2
        sd = np.sqrt(k * (g - k) / g / max(g - ddof, 1))
        scale = (sd + eps) ** std_power
        per_k = np.divide(sig2, scale, out=np.zeros(g + 1), where=sig2 > 0)  # (G+1,)
        return binom.pmf(k, g, p[..., None]) @ per_k
    if estimator in ("dr_grpo", "opo"):
        return dr
    if estimator == "rloo":
        return dr * g / (g - 1) if g > 1 else np.zeros_like(p)
    if estimator == "grpo_passk":
        sd = np.sqrt((g - 1) / g / max(g - ddof, 1))
        return p * (1 - p) ** g / (sd + eps) ** std_power if g > 1 else np.zeros_like(p)
    if estimator == "batch_std":
        return dr / (np.sqrt(pbar * (1 - pbar)) + eps) ** std_power
    if estimator == "gpg":
        return dr / pbar if pbar > 0 else np.zeros_like(p)
    if estimator == "gpg_paper":
        informative = 1 - float((batch**g + (1 - batch) ** g).mean())
        return dr / informative if informative > 0 else np.zeros_like(p)
    if estimator == "reinforce_pp_baseline":
        v = float((batch * (1 - batch) * (1 - 1 / g)).mean())
        return dr / np.sqrt(v + 1e-8)
    return p * (1 - p) / np.sqrt(pbar * (1 - pbar) + 1e-8)  # reinforce_pp
