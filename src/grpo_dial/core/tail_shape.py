"""The length push on a tail of any shape: the closed form's h and dE[T]/dtheta from a tail's
distribution instead of the geometric one (core/length_drift.py).

Model. After t tail tokens the policy continues with probability q_t, logit q_t = b_t + theta:
theta shifts every position's continue logit alike (the geometric tail is b_t constant). Then

    P(T = t) = (1 - q_t) prod_{j<t} q_j,
    s(t) = d/dtheta log P(T = t) = sum_{j<t} (1 - q_j) - q_t,        E[s] = 0,

and by the score identity d/dtheta E[f(T)] = E[f(T) s(T)]:

    h     = E[s(T) / (c + T)] = d/dtheta E[1 / |o|]   (the 1/|o| normalizer's push, as in
            length_drift: E[u_w] = -a Sigma h_w, E[u_c] = +a Sigma h_c under `sequence`),
    slope = E[T s(T)]         = d/dtheta E[T]         (tokens per unit theta; e^theta = E[T] for
            the geometric tail).

A distribution p(0..K) gives the hazards q_t = S(t+1) / S(t), S(t) = sum_{j>=t} p(j), for every
t < K with S(t) > 0; at the longest length K it stops (q_K = 0). For the geometric tail of mean m
(q = m / (1 + m)) h is length_drift's closed form and slope is m. Pure numpy.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike


def _pmf(pmf: ArrayLike) -> np.ndarray:
    p = np.asarray(pmf, dtype=float)
    if p.ndim != 1 or p.size < 1:
        raise ValueError(f"a tail distribution is a 1-D array of P(T = 0), P(T = 1), ...; got "
                         f"shape {p.shape}")  # fmt: skip
    total = float(p.sum())
    if (p < 0).any() or not np.isfinite(p).all() or not abs(total - 1.0) <= 1e-9:
        raise ValueError(f"a tail distribution has finite probabilities >= 0 summing to 1; got "
                         f"sum {total:.6g}")  # fmt: skip
    return p


def hazards(pmf: ArrayLike) -> np.ndarray:
    """q_t = P(continue | t tokens) = S(t+1) / S(t) per length t (module docstring); 0 at the
    longest length and past any length with S(t) = 0."""
    p = _pmf(pmf)
    survival = np.cumsum(p[::-1])[::-1]  # S(t)
    after = np.append(survival[1:], 0.0)  # S(t+1)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(survival > 0, after / survival, 0.0)
    return np.clip(q, 0.0, 1.0)


def tail_scores(pmf: ArrayLike) -> np.ndarray:
    """s(t) = sum_{j<t} (1 - q_j) - q_t per length t: d/dtheta log P(T = t) when theta shifts every
    continue logit (module docstring)."""
    q = hazards(pmf)
    stopped = np.concatenate([[0.0], np.cumsum(1.0 - q)[:-1]])
    return stopped - q


def tail_push(pmf: ArrayLike, core: float) -> tuple[float, float]:
    """(h, slope) of a tail distribution after a core of `core` tokens: h = E[s / (core + T)]
    and slope = E[T s] (module docstring)."""
    if not core > 0:
        raise ValueError(f"the core length must be > 0, got {core}")
    p = _pmf(pmf)
    t = np.arange(p.size, dtype=float)
    s = tail_scores(p)
    return float(np.sum(p * s / (core + t))), float(np.sum(p * t * s))


def geometric_pmf(mean: float, longest: int) -> np.ndarray:
    """P(T = t) = (1 - q) q^t for t < longest with q = mean / (1 + mean), the rest of the mass at
    `longest` (a geometric tail cut there)."""
    if not mean > 0 or longest < 1:
        raise ValueError(f"a geometric tail needs mean > 0 and longest >= 1, got {mean}, {longest}")
    q = mean / (1.0 + mean)
    p = (1 - q) * q ** np.arange(longest + 1, dtype=float)
    p[-1] = q**longest
    return p


def empirical_pmf(lengths: ArrayLike) -> np.ndarray:
    """The share of each tail length 0..max(lengths) among `lengths` (whole numbers >= 0)."""
    x = np.asarray(lengths)
    if x.size == 0 or (x < 0).any() or not np.all(np.mod(x, 1) == 0):
        raise ValueError("tail lengths are whole numbers >= 0, at least one")
    return np.bincount(x.astype(int)) / x.size


__all__ = ["empirical_pmf", "geometric_pmf", "hazards", "tail_push", "tail_scores"]
