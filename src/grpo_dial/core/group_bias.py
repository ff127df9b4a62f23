"""The non-degenerate-group bias of the group baseline (arXiv 2601.08521) and HA-DW's reweighting.

A prompt of true pass rate p is sampled G times; k ~ Binomial(G, p) responses are correct, the group
baseline is p_hat = k/G and response i gets the group-relative advantage A_i = r_i - p_hat (its true
expected advantage is r_i - p). Only non-degenerate groups (0 < k < G) give gradient, and on them
the baseline is biased:

    P(0 < k < G)           = 1 - p^G - (1-p)^G
    E[p_hat | 0 < k < G]   = (p - p^G) / (1 - p^G - (1-p)^G)   (1/G at p = 0, 1 - 1/G at p = 1)
    bias = E[p_hat | ...] - p = p(1-p) [(1-p)^(G-1) - p^(G-1)] / (1 - p^G - (1-p)^G)
    E[A_i | r_i = 1, ...]  = 1 - (1 + E[k' | k' < n]) / G,   E[k' | k' < n] = n(p - p^n) / (1 - p^n)
    E[A_i | r_i = 0, ...]  = -E[k' | k' > 0] / G,            E[k' | k' > 0] = n p / (1 - (1-p)^n)

with k' ~ Binomial(n = G-1, p) the other responses' count. Derivation (3 lines):
    E[k 1{0<k<G}] = E[k] - G P(k = G) = Gp - G p^G; divide by P(0<k<G) for the baseline.
    Given r_i = 1 the group is non-degenerate iff k' < n (not all correct), given r_i = 0 iff k' > 0
    E[k' 1{k' < n}] = np - n p^n and E[k' 1{k' > 0}] = np; divide by P(k' < n), P(k' > 0).
The baseline overestimates p for p < 1/2 and underestimates it above (the bias has the sign of
(1-p)^(G-1) - p^(G-1); bias(1-p) = -bias(p)), so a correct answer on a hard prompt gets too small
an advantage. E[A | r=1] < 1-p holds even without conditioning, by the factor (G-1)/G of a
baseline that includes the response itself; the conditioning adds the bias above.

HA-DW (history-aware difficulty weighting) multiplies each advantage by

    Phi_i = s exp(D_i M),  D_i = -sgn(A_i) sgn(p_hat - C),  M = |p_hat - C|,
    i.e.  Phi_i = s exp(-sgn(A_i) (p_hat - C))

with C in [0, 1] the difficulty anchor (the model's running accuracy) and s > 0 a scale: on a prompt
harder than the anchor (p_hat < C) a correct response's advantage grows by e^M and a wrong one's
shrinks; on an easier prompt the reverse. Departure: this form of Phi is the one in the description
of arXiv 2601.08521 in TRL PR #4872 (huggingface/trl#4872, closed, not merged, so no mainstream
trainer ships it); the anchor's history update is not modelled, C is a given number here.

Every conditional expectation is computed as the exact sum over the allowed counts with binomial pmf
weights, normalized in log space (stable for p near 0 or 1); at p in {0, 1} exactly the weights are
their limit, all mass on the allowed count nearest the unanimous one (k = 1 or k = G-1 for the
baseline). The closed forms above are checked against these sums in the tests. p broadcasts (and so
does the anchor); G is one integer >= 2. Results are ndarrays (0-d for scalar inputs).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import gammaln, xlog1py, xlogy


def _finite(x: ArrayLike, name: str) -> np.ndarray:
    try:
        a = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be numeric, got {x!r}") from None
    if not np.isfinite(a).all():
        raise ValueError(f"{name} must be finite (no NaN or inf)")
    return a


def _unit(x: ArrayLike, name: str) -> np.ndarray:
    a = _finite(x, name)
    if ((a < 0) | (a > 1)).any():
        raise ValueError(f"{name} must lie in [0, 1], got min {a.min()} max {a.max()}")
    return a


def _group_size(G: object) -> int:
    if isinstance(G, bool) or not isinstance(G, (int, np.integer, float, np.floating)):
        raise ValueError(f"G must be one integer >= 2, got {G!r}")
    if not np.isfinite(G) or G != int(G) or G < 2:
        raise ValueError(f"G must be one integer >= 2, got {G!r}")
    return int(G)


def _correct(correct: object) -> bool:
    if not isinstance(correct, (bool, np.bool_)):
        raise ValueError(f"correct must be a bool (the response's reward is 1), got {correct!r}")
    return bool(correct)


def _scale(scale: object) -> float:
    s = _finite(scale, "scale")
    if s.ndim or s <= 0:
        raise ValueError(f"scale must be one number > 0, got {scale!r}")
    return float(s)


def _truncated_binomial(p: np.ndarray, n: int, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """Counts k = lo..hi, shape (K,), and weights P(k | lo <= k <= hi), k ~ Binomial(n, p), shape
    p.shape + (K,).

    Log-space softmax over the allowed counts; at p = 0 (1) all weight on k = lo (hi), the limit.
    """
    k = np.arange(lo, hi + 1)  # (K,)
    pe = p[..., None]  # (..., 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        logw = (
            gammaln(n + 1)
            - gammaln(k + 1)
            - gammaln(n - k + 1)
            + xlogy(k, pe)
            + xlog1py(n - k, -pe)
        )
        logw = np.where((pe > 0) & (pe < 1), logw, 0.0)  # (..., K); the ends are set below
        w = np.exp(logw - logw.max(-1, keepdims=True))
    w = np.where(pe == 0, k == lo, np.where(pe == 1, k == hi, w))
    return k, w / w.sum(-1, keepdims=True)


def _others(p: np.ndarray, G: int, correct: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Given r_i and 0 < k < G: weights of k' (the other G-1 rewards), and p_hat and A_i per k'.

    Returns (w, p_hat, adv) with w of shape p.shape + (K,) and p_hat, adv of shape (K,).
    """
    if correct:  # not all correct: k' <= G-2
        k, w = _truncated_binomial(p, G - 1, 0, G - 2)
        p_hat = (1 + k) / G
        return w, p_hat, 1 - p_hat
    k, w = _truncated_binomial(p, G - 1, 1, G - 1)  # not all wrong: k' >= 1
    p_hat = k / G
    return w, p_hat, -p_hat


def nondegenerate_probability(p: ArrayLike, G: int) -> np.ndarray:
    """P(0 < k < G) = 1 - p^G - (1-p)^G: the chance a group of G gives any gradient."""
    p, G = _unit(p, "p"), _group_size(G)
    q = np.minimum(p, 1 - p)  # the expression is symmetric in p <-> 1-p; expm1 avoids 1 - (1-q)^G
    return np.asarray(-np.expm1(G * np.log1p(-q)) - q**G)


def nondegenerate_baseline(p: ArrayLike, G: int) -> np.ndarray:
    """E[k/G | 0 < k < G] = (p - p^G) / (1 - p^G - (1-p)^G); 1/G at p = 0, 1 - 1/G at p = 1.

    Computed as sum_{k=1}^{G-1} (k/G) Bin(k; G, p) / sum_{k=1}^{G-1} Bin(k; G, p).
    """
    p, G = _unit(p, "p"), _group_size(G)
    k, w = _truncated_binomial(p, G, 1, G - 1)
    return np.asarray(w @ (k / G))


def baseline_bias(p: ArrayLike, G: int) -> np.ndarray:
    """E[p_hat | 0 < k < G] - p = p(1-p) [(1-p)^(G-1) - p^(G-1)] / (1 - p^G - (1-p)^G).

    Positive for p < 1/2, exactly 0 at 1/2, negative above, bias(1-p) = -bias(p); 1/G at p = 0 and
    -1/G at p = 1. Evaluated in this factored form, not as baseline - p, so that the sign stays
    exact where the bias is far below float resolution (p near 1/2 at large G).
    """
    p, G = _unit(p, "p"), _group_size(G)
    nondeg = nondegenerate_probability(p, G)
    num = p * (1 - p) * ((1 - p) ** (G - 1) - p ** (G - 1))
    ends = np.where(p < 0.5, 1.0 / G, -1.0 / G)  # the limits at p = 0 and p = 1
    return np.asarray(np.divide(num, nondeg, out=ends, where=nondeg > 0))


def true_advantage(p: ArrayLike, correct: bool) -> np.ndarray:
    """The true expected advantage r - p of a response: 1 - p if correct, -p if not."""
    p, correct = _unit(p, "p"), _correct(correct)
    return np.asarray(1 - p if correct else -p)


def conditional_advantage(p: ArrayLike, G: int, correct: bool) -> np.ndarray:
    """E[A_i | r_i, 0 < k < G], A_i = r_i - k/G, with k' ~ Binomial(G-1, p) the other rewards:

    correct: 1 - (1 + E[k' | k' < G-1]) / G;  wrong: -E[k' | k' > 0] / G (exact sums over k').
    Limits: correct 1 - 1/G at p = 0 and 1/G at p = 1; wrong -1/G at p = 0 and -(1 - 1/G) at p = 1.
    """
    p, G, correct = _unit(p, "p"), _group_size(G), _correct(correct)
    w, _, adv = _others(p, G, correct)
    return np.asarray(w @ adv)


def hadw_weight(
    p_hat: ArrayLike, advantage: ArrayLike, anchor: ArrayLike, scale: float = 1.0
) -> np.ndarray:
    """HA-DW's multiplier Phi = s exp(-sgn(A) (p_hat - C)) = s exp(D M), D = -sgn(A) sgn(p_hat - C),
    M = |p_hat - C|; broadcasts over p_hat, advantage and anchor C (sgn(0) = 0 gives Phi = s)."""
    p_hat, anchor, s = _unit(p_hat, "p_hat"), _unit(anchor, "anchor"), _scale(scale)
    return np.asarray(s * np.exp(-np.sign(_finite(advantage, "advantage")) * (p_hat - anchor)))


def hadw_conditional_advantage(
    p: ArrayLike, G: int, correct: bool, anchor: ArrayLike, scale: float = 1.0
) -> np.ndarray:
    """E[Phi_i A_i | r_i, 0 < k < G] with Phi_i = s exp(-sgn(A_i) (p_hat - C)), p and C broadcast:

    sum over the other responses' count k' of Bin(k'; G-1, p) (restricted as in
    conditional_advantage) times Phi(p_hat(k'), A(k')) A(k'); correct: p_hat = (1+k')/G,
    A = 1 - p_hat, so Phi = s e^(C - p_hat); wrong: p_hat = k'/G, A = -p_hat, Phi = s e^(p_hat - C).
    """
    p, G, correct = _unit(p, "p"), _group_size(G), _correct(correct)
    anchor, s = _unit(anchor, "anchor"), _scale(scale)
    p, anchor = np.broadcast_arrays(p, anchor)
    w, p_hat, adv = _others(p, G, correct)
    phi = hadw_weight(p_hat, adv, anchor[..., None], s)  # (..., K)
    return np.asarray((w * phi * adv).sum(-1))
