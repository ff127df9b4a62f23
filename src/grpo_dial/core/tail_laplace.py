"""The geometric tail's Laplace transforms and the quadrature over lambda that the closed forms of
core/length_drift.py and core/length_weighted_drift.py integrate with.

A tail T ~ Geometric (P(T = t) = (1 - q) q^t) has E[e^(-l T)] = phi = (1 - q)/(1 - q x), x = e^-l,
and its score s = (1 - q) T - q gives E[s e^(-l T)] = psi. A normalizer 1/N (N a group's or a
batch's total length) is written 1/N = int_0^inf e^(-l N) dl, so expectations of products over
independent tails factor into powers of these transforms, integrated over lambda.
"""

from __future__ import annotations

import numpy as np
from scipy.special import comb

# Composite Gauss-Legendre in v = lambda * G * c: panels [0, 2^-12], then doubling up to 2^7;
# the integrand is below e^-v, so the cut at v = 128 drops < 1e-55 of it.
_EDGES = np.concatenate([[0.0], 2.0 ** np.arange(-12, 8)])
_X, _W = np.polynomial.legendre.leggauss(10)
NODES = np.concatenate(
    [(b - a) / 2 * _X + (a + b) / 2 for a, b in zip(_EDGES[:-1], _EDGES[1:], strict=True)]
)  # v
WEIGHTS = np.concatenate(
    [(b - a) / 2 * _W for a, b in zip(_EDGES[:-1], _EDGES[1:], strict=True)]
)  # dv


def binomial_pmf(n: int, prob: np.ndarray) -> np.ndarray:
    """(E, n+1) Binomial(n, prob) probabilities (scipy.stats' per-call overhead is the cost)."""
    k = np.arange(n + 1)
    return comb(n, k) * prob[:, None] ** k * (1 - prob[:, None]) ** (n - k)


def transforms(lam, q):
    """phi = E[e^(-l T)], psi = E[s e^(-l T)] of a geometric tail (l: (E, V) lambda)."""
    x = np.exp(-lam)  # (E, V)
    phi = (1 - q) / (1 - q * x)
    psi = -q * (1 - q) * (1 - x) / (1 - q * x) ** 2
    return phi, psi


def tail_transforms(lam, q):
    """phi, psi, eta = E[T e^(-l T)], chi = E[T s e^(-l T)] of a geometric tail, s = (1-q) T - q."""
    x, (phi, psi) = np.exp(-lam), transforms(lam, q)
    eta = (1 - q) * q * x / (1 - q * x) ** 2
    t2 = (1 - q) * q * x * (1 + q * x) / (1 - q * x) ** 3  # E[T^2 e^(-l T)]
    return phi, psi, eta, (1 - q) * t2 - q * eta
