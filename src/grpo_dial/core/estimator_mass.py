"""Every engine's estimator on one dial, in closed form: the expected gradient mass one prompt
of pass rate p receives, m(p) = E[(1/G) sum_i A_i (r_i - p)] (the update of a Bernoulli-logit
prompt, score r - p, per unit learning rate), for binary rewards and k ~ Binomial(G, p), with
the batch's constants at their large-batch limits; and which estimators are Dr. GRPO's
operation up to a per-batch constant (SAME_OPERATION); and the length drift of REINFORCE++'s
whitening over tokens (whitened_tail_drift, the tail model of core.length_drift). numpy/scipy
only; tested against a Monte Carlo through the dial's own advantages
(tests/core/test_estimator_mass.py, tests/core/test_whitened_drift.py).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy.stats import binom

from grpo_dial.core.checks import check_choice, check_int
from grpo_dial.core.length_drift import (
    TailDrift,
    correct_tail_mean,
    inverse_length_covariance,
    tail_drift,
    tail_mean,
    wrong_tail_mean,
)


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


def _pmf_moments(p: np.ndarray, g: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """E[k(G-k)], E[k(G-k)^2], E[(G-k)k^2] for k ~ Binomial(G, p); each (E,)."""
    k = np.arange(g + 1)
    pk = binom.pmf(k, g, p[:, None])  # (E, G+1)
    return pk @ (k * (g - k)), pk @ (k * (g - k) ** 2), pk @ ((g - k) * k**2)


def _token_whitened(p, qw, qc, a, g, m, baseline, mu, sd, d, shape) -> TailDrift:
    """-E[T_X] E[sum_{i on X} z_i (3 + z_i^2)] / (2 M D^2), z = (a - mu)/sd, per element."""
    k = np.arange(g + 1)
    pk = binom.pmf(k, g, p[:, None])  # (E, G+1)
    plus, minus = (1 - k / g, -k / g) if baseline == "mean" else (np.ones(g + 1), np.zeros(g + 1))
    gp, gm = ((x - mu) / sd * (3 + ((x - mu) / sd) ** 2) for x in (plus, minus))  # (G+1,)
    pi0, pi1 = (1 + a[:, None]) / 2, (1 - a[:, None]) / 2  # P(theta_w | wrong), (.. | correct)
    on_w = (pk * (k * pi1 * gp + (g - k) * pi0 * gm)).sum(1)  # (E,)
    on_c = (pk * (k * (1 - pi1) * gp + (g - k) * (1 - pi0) * gm)).sum(1)
    scale = -1 / (2 * m * d**2)
    return TailDrift(
        (scale * tail_mean(qw) * on_w).reshape(shape), (scale * tail_mean(qc) * on_c).reshape(shape)
    )


def whitened_tail_drift(
    p: ArrayLike,
    q_wrong: ArrayLike,
    q_correct: ArrayLike,
    core_length: ArrayLike,
    group_size: int,
    length_norm: str = "sequence",
    awareness: ArrayLike = 1.0,
    baseline: str = "mean",
    max_length: float | None = None,
    n_groups: int | None = None,
) -> TailDrift:
    """E[u_w], E[u_c] per group (before the learning rate) under REINFORCE++'s whitening over
    tokens (verl's reinforce_plus_plus(_baseline); the tail model of core.length_drift), with
    the batch's statistics at their large-batch limit over the prompts of this call (each a
    batchmate equally often). With a_i = r_i - k/G (baseline 'mean', the REINFORCE++ baseline) or
    r_i ('none', REINFORCE++) and |o| = c + T, the whitened advantage is A = (a - mu)/sd with

        mu  -> mean_j N_j / mean_j D_j,   sd^2 -> mean_j Q_j / mean_j D_j - mu^2 (+ 1e-8)
        N = E[sum_i |o_i| a_i] = (G-1) p(1-p) (T_c - T_w)        ('mean'; 'none': G p (c + T_c))
        D = E[sum_i |o_i|]     = G (c + p T_c + (1-p) T_w)
        Q = E[sum_i |o_i| a_i^2] = [(c + T_c) E k(G-k)^2 + (c + T_w) E (G-k)k^2] / G^2
                                                                 ('none': G p (c + T_c))

    T_w = E[T | wrong], T_c = E[T | correct] (awareness a routes the tails). mu and sd are then
    constants, so E[u_X] = (E[u_X; a] - mu C_X) / sd: the drift of the unwhitened advantage
    (core.length_drift.tail_drift at std_power 0 for 'mean'; for 'none' p pi_X|c h_X under
    'sequence', pi_w|c = (1-a)/2) minus mu times the drift C_X of a unit advantage on every
    response: 0 under 'constant', P_X h(q_X, c) under 'sequence' (w = 1/(G|o|); P_w = p pi_1 +
    (1-p) pi_0, h = E[s/|o|] < 0 of core.length_drift.inverse_length_covariance).

    So when wrong answers run longer (T_w > T_c), mu < 0 and every advantage rises by |mu|/sd,
    silent groups' included: under the constant normalizer that shift moves no tail in
    expectation; under the sequence normalizer it pushes every tail shorter (E[s/|o|] < 0),
    against the mean baseline's push of the wrong tail longer. A blind tail (a = 0) gets 0 with
    the mean baseline.

    Token normalizer (DAPO's token mean; core.length_drift's scale w = M/S, S the tokens of the
    batch's M = n_groups groups): w -> 1/D, D = mean_j D_j, a constant, so at the limit the
    drift is 0 as under 'constant'. Its leading term is O(1/M): only a response's own tail T_i
    covaries with its score s_i, through w, mu and sd (each moved by O(1/(M D)) per token).
    With z = (a - mu)/sd, d(z_i w)/dT_i = -z_i (3 + z_i^2) / (2 M D^2) (w: -z; mu: -z; sd:
    -z (z^2 - 1)/2) and Cov(s, T) = E[T] = q/(1-q), so, up to O(1/M^2),

        E[u_X] = -E[T_X] E[sum_{i on X} z_i (3 + z_i^2)] / (2 M D^2)

    over k and the routing. Unwhitened (z = a, mu and sd fixed) this is -E[T_X] E[N_X]/(M D^2),
    tail_drift's token form at large M. A blind tail drifts too: E[z^3] != 0 (skewed A)."""
    arrays = np.broadcast_arrays(
        _prob(p, "p"), _prob(q_wrong, "q_wrong"), _prob(q_correct, "q_correct"),
        np.asarray(core_length, dtype=float), _prob(awareness, "awareness"),
    )  # fmt: skip
    shape = arrays[0].shape
    p, qw, qc, c, a = (x.reshape(-1) for x in arrays)
    if ((qw <= 0) | (qw >= 1) | (qc <= 0) | (qc >= 1)).any() or not (c > 0).all():
        raise ValueError("q_wrong and q_correct must lie in (0, 1) and core_length be > 0")
    g = check_int("group_size", group_size, 2)
    check_choice("length_norm", length_norm, ("sequence", "constant", "token"))
    check_choice("baseline", baseline, ("mean", "none"))
    if length_norm == "constant" and not (max_length or 0) > 0:
        raise ValueError("length_norm='constant' needs max_length > 0 (L_max)")
    if length_norm == "token":
        if n_groups is None:
            raise ValueError("length_norm='token' needs n_groups (M, groups per batch) >= 1")
        m = check_int("n_groups", n_groups, 1)
    tw, tc = wrong_tail_mean(qw, qc, a), correct_tail_mean(qw, qc, a)  # (E,)
    m1, m2, m3 = _pmf_moments(p, g)
    den = g * (c + p * tc + (1 - p) * tw)
    if baseline == "mean":
        num = m1 / g * (tc - tw)
        sq = ((c + tc) * m2 + (c + tw) * m3) / g**2
    else:
        num = sq = g * p * (c + tc)
    mu = num.mean() / den.mean()
    sd = np.sqrt(sq.mean() / den.mean() - mu**2 + 1e-8)
    if length_norm == "token":
        return _token_whitened(p, qw, qc, a, g, m, baseline, mu, sd, den.mean(), shape)
    if length_norm == "constant":  # E[s] = 0 given the routing: neither a nor a unit moves it
        return TailDrift(np.zeros(shape), np.zeros(shape))
    hw, hc = inverse_length_covariance(qw, c), inverse_length_covariance(qc, c)
    pi0, pi1 = (1 + a) / 2, (1 - a) / 2
    share_w = p * pi1 + (1 - p) * pi0  # P(a response uses theta_w)
    if baseline == "mean":
        base = tail_drift(p, qw, qc, c, g, std_power=0.0, length_norm="sequence", awareness=a)
        fw, fc = base.wrong, base.correct
    else:
        fw, fc = p * pi1 * hw, p * (1 - pi1) * hc
    uw = (fw - mu * share_w * hw) / sd
    uc = (fc - mu * (1 - share_w) * hc) / sd
    return TailDrift(uw.reshape(shape), uc.reshape(shape))
