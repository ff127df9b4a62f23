"""Closed form of the length drift: how each loss normalizer moves a free-length tail.

Model. A response is a core of c tokens that decides correctness (r ~ Bernoulli(p)) followed by a
tail of T tokens that does not: after the core, and after every tail token, the policy continues
with probability q = sigmoid(theta), so P(T = t) = (1 - q) q^t, E[T] = q/(1-q) = e^theta and
|o| = c + T. The tail's score is

    s(T) = d/dtheta log P(T) = (1 - q) T - q = (1 - q)(T - E[T]),     E[s] = 0.

Awareness a in [0, 1]. The policy has two tail parameters, theta_w ("I am on a wrong path") and
theta_c; a wrong response uses theta_w with probability pi_0 = (1 + a)/2, a correct one with
pi_1 = (1 - a)/2 (a = 0: a coin independent of correctness, blind; a = 1: it knows).

Update. On policy (ratio 1, so clipping does not bind) a group of G responses moves a tail
parameter by u = sum_i A_i w_i s_i 1{response i uses it}, with the normalizer's weight w_i:
    sequence  w_i = 1 / (G |o_i|)
    constant  w_i = 1 / (G L_max)
    token     w_i = M / S,  S = total tokens of the M groups normalized together (scope 'group':
              M = 1; 'batch': M groups, the batch loss scaled by M so a prompt's step has the
              same size as under the other normalizers)
i.e. the gradient of M x `advantage.sequence_mean / constant_normalizer / token_mean` of the
batch. A_+ = (1 - k/G)/(sigma_d + eps)^alpha, A_- = -(k/G)/(sigma_d + eps)^alpha, k correct.

Derivation. Given the rewards, a tail is independent of them, and k A_+ = -(G - k) A_- =
G sigma^2 / (sigma_d + eps)^alpha with sigma^2 = k(G-k)/G^2 (the group-std identity). Hence

    constant:  E[u] = (1/(G L_max)) E[sum A_i 1{.}] E[s] = 0 exactly, at any awareness.
    sequence:  E[u_w] = -a Sigma h(q_w, c),  E[u_c] = +a Sigma h(q_c, c),   where
               Sigma = E[sigma^2 / (sigma_d + eps)^alpha] (= E[sigma^(2-alpha)] at ddof 0, eps 0)
               h(q, c) = E[s / (c + T)] = Cov(s, 1/|o|)
                       = -q (1 - q) 2F1(2, c; c + 2; q) / (c (c + 1))  < 0
               (Euler's integral of 1/(c+T) = int_0^1 x^(c+T-1) dx). Wrong tails are pushed
               longer, correct ones shorter, linearly in a; a blind tail (a = 0) gets 0.
    token:     1/S = int_0^inf e^(-lambda S) d lambda factorizes over responses. With
               phi(l; q) = E[e^(-l T)] = (1 - q)/(1 - q e^-l) and
               psi(l; q) = E[s e^(-l T)] = -q (1 - q)(1 - e^-l)/(1 - q e^-l)^2,
               E[u_w] = M int_0^inf e^(-l G c) E[N_w psi_w phi_w^(n-1) phi_c^(G-n)] Phi(l)^(M-1) dl
               where n = number of responses using theta_w, N_w = sum of their advantages and
               Phi(l) = E[e^(-l S_group)] of a batchmate group (1 for a dropped silent group);
               E[u_c] likewise. Here the response's own length is one of the G M lengths in S,
               so the drift is a fraction of the sequence drift (~1/(G M)): 15 % at G = 8,
               c = 20, mean tail 4, scope 'group', and -> 0 as M grows. E[N_w] = -a G Sigma
               again, so a blind tail gets 0 here too.

A length-weighted baseline (OPO: b_g = sum_j |o_j| r_j / sum_j |o_j|) shifts every advantage of a
group by -(b_g - k/G) / s_k; under the constant normalizer that shift is the whole drift,
E[u_X] = -(1/(G L_max)) E[b_g S_X / s_k] (S_X: the scores on tail X), by the same Laplace
integral as the token case (core/length_weighted_drift.py). A blind tail gets 0; a tail taken
more often when wrong, and longer, is pushed longer (b falls below k/G, every advantage of the
group rises).

DAPO's dynamic sampling (silent='drop', R redraws) changes the distribution of k: an interior k
has probability Binom(k; G, p) (1 + s + ... + s^R), s = p^G + (1-p)^G, and a group still silent
after R redraws is dropped (no gradient, no tokens in S).

Everything broadcasts over p, q_wrong and q_correct; group_size, the normalizer and scope are
scalars. The token case is a 1-D integral done by fixed composite Gauss-Legendre (relative error
< 1e-9 against adaptive quadrature in the tests).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import hyp2f1

from grpo_dial.core.checks import check_int
from grpo_dial.core.std_factor import std_factor
from grpo_dial.core.tail_laplace import NODES, WEIGHTS, binomial_pmf, transforms

NORMALIZERS = ("sequence", "constant", "token")
BASELINES = ("mean", "length_weighted")
SCOPES = ("group", "batch")
SILENT = ("keep", "drop")
BATCHMATES = ("self", "population")


class TailDrift(NamedTuple):
    """Expected per-group update of the wrong-path and correct-path tail parameters (no lr)."""

    wrong: np.ndarray
    correct: np.ndarray


def _array(x: ArrayLike, name: str) -> np.ndarray:
    try:
        a = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be numeric, got {x!r}") from None
    if not np.isfinite(a).all():
        raise ValueError(f"{name} must be finite")
    return a


def _open_unit(x: ArrayLike, name: str) -> np.ndarray:
    a = _array(x, name)
    if ((a <= 0) | (a >= 1)).any():
        raise ValueError(
            f"{name} must lie strictly between 0 and 1, got min {a.min()} max {a.max()}"
        )
    return a


def _unit(x: ArrayLike, name: str) -> np.ndarray:
    a = _array(x, name)
    if ((a < 0) | (a > 1)).any():
        raise ValueError(f"{name} must lie in [0, 1], got min {a.min()} max {a.max()}")
    return a


def _choice(v: object, options: tuple[str, ...], name: str) -> str:
    if v not in options:
        raise ValueError(f"unknown {name} {v!r}; valid: {', '.join(options)}")
    return str(v)


def _core(c: ArrayLike) -> np.ndarray:
    a = _array(c, "core_length")
    if (a < 1).any():
        raise ValueError(
            f"core_length must be >= 1 token (the core decides correctness), got {a.min()}"
        )
    return a


def tail_mean(q: ArrayLike) -> np.ndarray:
    """E[T] = q / (1 - q) of the geometric tail (= e^theta for q = sigmoid(theta))."""
    q = _open_unit(q, "q")
    return q / (1 - q)


def tail_score(t: ArrayLike, q: ArrayLike) -> np.ndarray:
    """s = d/dtheta log P(T = t) = (1 - q) t - q, for q = sigmoid(theta)."""
    t, q = _array(t, "t"), _open_unit(q, "q")
    if (t < 0).any():
        raise ValueError(f"tail length t must be >= 0, got {t.min()}")
    return (1 - q) * t - q


def inverse_length_covariance(q: ArrayLike, core_length: ArrayLike) -> np.ndarray:
    """h(q, c) = E[s / (c + T)] = Cov(s, 1/|o|) = -q (1-q) 2F1(2, c; c+2; q) / (c (c+1)) < 0."""
    q, c = np.broadcast_arrays(_open_unit(q, "q"), _core(core_length))
    return -q * (1 - q) * hyp2f1(2.0, c, c + 2.0, q) / (c * (c + 1))


def _k_weights(p: np.ndarray, G: int, silent: str, rounds: int) -> tuple[np.ndarray, np.ndarray]:
    """(E, G+1) probability of a final group with k correct, and whether it is kept."""
    pk = binomial_pmf(G, p)  # (E, G+1)
    kept = np.ones(G + 1, dtype=bool)
    if silent == "drop" and G > 1:
        s = pk[:, 0] + pk[:, G]  # (E,)
        refill = sum(s**j for j in range(rounds + 1))  # (E,) 1 + s + ... + s^R
        pk = pk * refill[:, None]
        pk[:, [0, G]] *= (s**rounds / refill)[:, None]  # silent after R redraws
        kept[[0, G]] = False
    return pk, kept


def _advantage_pair(G: int, alpha: float, ddof: int, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """(G+1,) advantages of a correct and a wrong response in a group with k correct."""
    k = np.arange(G + 1, dtype=float)
    sd = np.sqrt(k * (G - k) / G / max(G - ddof, 1))
    scale = std_factor(sd, eps, alpha)  # silent: numerator 0, so 0 (as core.advantage)
    silent = (k == 0) | (k == G)
    plus = np.where(silent, 0.0, (1 - k / G) / scale)
    minus = np.where(silent, 0.0, -(k / G) / scale)
    return plus, minus


def sigma_moment(
    p: ArrayLike,
    group_size: int,
    std_power: float = 1.0,
    ddof: int = 0,
    eps: float = 0.0,
    silent: str = "keep",
    max_resample_rounds: int = 0,
) -> np.ndarray:
    """Sigma = E[sigma^2 / (sigma_d + eps)^alpha] over the final k (E[sigma^(2-alpha)] at ddof 0,
    eps 0); with silent='drop' the k distribution after up to R redraws of a silent group."""
    p = _unit(p, "p")
    G = check_int("group_size", group_size, 1)
    plus, _ = _advantage_pair(G, _alpha(std_power), check_int("ddof", ddof, 0), _eps(eps))
    pk, _ = _k_weights(
        p.reshape(-1),
        G,
        _choice(silent, SILENT, "silent"),
        check_int("max_resample_rounds", max_resample_rounds, 0),
    )
    k = np.arange(G + 1)
    return (pk @ (k * plus / G)).reshape(p.shape)  # k A_+ / G = sigma^2 / scale


def _alpha(a: object) -> float:
    if isinstance(a, bool) or not isinstance(a, int | float) or not 0 <= a <= 1:
        raise ValueError(f"std_power must be a number in [0, 1], got {a!r}")
    return float(a)


def _eps(e: object) -> float:
    if isinstance(e, bool) or not isinstance(e, int | float) or not 0 <= e < np.inf:
        raise ValueError(f"eps must be a finite number >= 0, got {e!r}")
    return float(e)


def _routing_moments(p, G, a, alpha, ddof, eps, silent, rounds):
    """Per element, over n = responses using theta_w (0..G): E[N_w 1{n}], E[N_c 1{n}] and
    P(n, kept), P(dropped); N = the advantages of the responses using that parameter."""
    pk, kept = _k_weights(p, G, silent, rounds)  # (E, G+1)
    plus, minus = _advantage_pair(G, alpha, ddof, eps)  # (G+1,)
    pi0, pi1 = (1 + a) / 2, (1 - a) / 2  # (E,)
    e = p.size
    nw, nc, pn = (np.zeros((e, G + 1)) for _ in range(3))
    dropped = np.zeros(e)
    for k in range(G + 1):
        if not kept[k]:
            dropped += pk[:, k]
            continue
        f1 = binomial_pmf(k, pi1)  # (E, k+1): correct responses using theta_w
        f0 = binomial_pmf(G - k, pi0)  # (E, G-k+1): wrong ones using it
        for m1 in range(k + 1):
            m0 = np.arange(G - k + 1)
            w = pk[:, k, None] * f1[:, m1, None] * f0  # (E, G-k+1)
            sl = slice(m1, m1 + G - k + 1)
            pn[:, sl] += w
            nw[:, sl] += w * (m1 * plus[k] + m0 * minus[k])
            nc[:, sl] += w * ((k - m1) * plus[k] + (G - k - m0) * minus[k])
    return nw, nc, pn, dropped


def _token_pieces(p, qw, qc, c, G, a, alpha, ddof, eps, silent, rounds):
    """On the nodes lambda_v = v / (G c): the w/c numerators' integrands (E, V) and the group's
    length MGF E[kept e^(-lambda S_group)] + P(dropped) (E, V)."""
    nw, nc, pn, dropped = _routing_moments(p, G, a, alpha, ddof, eps, silent, rounds)
    lam = NODES[None, :] / (G * c[:, None])  # (E, V)
    phw, psw = transforms(lam, qw[:, None])
    phc, psc = transforms(lam, qc[:, None])
    core = np.exp(-lam * G * c[:, None])  # (E, V)
    pw, pc = [np.ones(lam.shape)], [np.ones(lam.shape)]  # phi^n for n = 0..G
    for _ in range(G):
        pw.append(pw[-1] * phw)
        pc.append(pc[-1] * phc)
    jw, jc, mgf = (np.zeros(lam.shape) for _ in range(3))
    for n in range(G + 1):
        mgf += pn[:, n, None] * pw[n] * pc[G - n]
        if n >= 1:
            jw += nw[:, n, None] * pw[n - 1] * pc[G - n]
        if n <= G - 1:
            jc += nc[:, n, None] * pw[n] * pc[G - n - 1]
    jw, jc = jw * psw, jc * psc
    return core * jw, core * jc, core * mgf + dropped[:, None]


def tail_drift(
    p: ArrayLike,
    q_wrong: ArrayLike,
    q_correct: ArrayLike,
    core_length: ArrayLike,
    group_size: int,
    std_power: float = 1.0,
    length_norm: str = "sequence",
    awareness: ArrayLike = 1.0,
    scope: str = "group",
    n_groups: int = 1,
    ddof: int = 0,
    eps: float = 0.0,
    silent: str = "keep",
    max_resample_rounds: int = 0,
    batchmates: str = "self",
    baseline: str = "mean",
    max_length: float | None = None,
) -> TailDrift:
    """E[u_w], E[u_c]: expected per-group update of theta_w and theta_c before the learning rate
    (formulas in the module docstring). scope 'batch' normalizes n_groups groups together (token
    only); the other groups are copies of this prompt (batchmates 'self') or drawn uniformly from
    the prompts of this call ('population'). baseline 'length_weighted' (OPO) is derived under
    length_norm 'constant', whose L_max is max_length. Broadcasts over p, q_wrong, q_correct,
    core_length and awareness."""
    arrays = np.broadcast_arrays(
        _unit(p, "p"),
        _open_unit(q_wrong, "q_wrong"),
        _open_unit(q_correct, "q_correct"),
        _core(core_length),
        _unit(awareness, "awareness"),
    )
    shape = arrays[0].shape
    p, qw, qc, c, a = (x.reshape(-1).astype(float) for x in arrays)
    G = check_int("group_size", group_size, 1)
    alpha, eps = _alpha(std_power), _eps(eps)
    ddof = check_int("ddof", ddof, 0)
    rounds = check_int("max_resample_rounds", max_resample_rounds, 0)
    length_norm = _choice(length_norm, NORMALIZERS, "length_norm")
    batchmates = _choice(batchmates, BATCHMATES, "batchmates")
    scope, silent = _choice(scope, SCOPES, "scope"), _choice(silent, SILENT, "silent")
    m = check_int("n_groups", n_groups, 1) if scope == "batch" else 1
    if _choice(baseline, BASELINES, "baseline") == "length_weighted":
        l_max = _array(max_length or 0, "max_length")
        if length_norm != "constant" or silent != "keep" or not l_max > 0:
            raise ValueError(
                "baseline='length_weighted' is derived for length_norm 'constant' with its "
                "max_length (L_max > 0) and silent 'keep'"
            )
        from grpo_dial.core.length_weighted_drift import length_weighted_integrals

        jw, jc = length_weighted_integrals(p, qw, qc, c, G, a, alpha, ddof, eps) / (-G * max_length)
        return TailDrift(jw.reshape(shape), jc.reshape(shape))
    if length_norm == "constant":
        zero = np.zeros(shape)
        return TailDrift(zero, zero.copy())
    if length_norm == "sequence":
        sig = sigma_moment(p, G, alpha, ddof, eps, silent, rounds)
        hw, hc = inverse_length_covariance(qw, c), inverse_length_covariance(qc, c)
        return TailDrift((-a * sig * hw).reshape(shape), (a * sig * hc).reshape(shape))
    jw, jc, mgf = _token_pieces(p, qw, qc, c, G, a, alpha, ddof, eps, silent, rounds)
    if m > 1:
        if batchmates == "population":
            if np.ptp(c) > 0 or np.ptp(a) > 0:
                raise ValueError("batchmates='population' needs one core_length and awareness")
            others = mgf.mean(axis=0, keepdims=True)  # (1, V): a prompt drawn from the call's
        else:
            others = mgf  # (E, V): copies of the prompt itself
        factor = m * others ** (m - 1)
        jw, jc = jw * factor, jc * factor
    dlam = WEIGHTS[None, :] / (G * c[:, None])  # (E, V)
    return TailDrift((jw * dlam).sum(axis=1).reshape(shape), (jc * dlam).sum(axis=1).reshape(shape))


def wrong_tail_mean(q_wrong: ArrayLike, q_correct: ArrayLike, awareness: ArrayLike) -> np.ndarray:
    """E[T | wrong] = pi_0 E[T; q_w] + (1 - pi_0) E[T; q_c], pi_0 = (1 + a)/2."""
    pi0 = (1 + _unit(awareness, "awareness")) / 2
    return pi0 * tail_mean(q_wrong) + (1 - pi0) * tail_mean(q_correct)


def correct_tail_mean(q_wrong: ArrayLike, q_correct: ArrayLike, awareness: ArrayLike) -> np.ndarray:
    """E[T | correct] = pi_1 E[T; q_w] + (1 - pi_1) E[T; q_c], pi_1 = (1 - a)/2."""
    pi1 = (1 - _unit(awareness, "awareness")) / 2
    return pi1 * tail_mean(q_wrong) + (1 - pi1) * tail_mean(q_correct)
