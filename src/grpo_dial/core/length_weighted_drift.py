"""OPO's length-weighted baseline b = sum_j |o_j| r_j / sum_j |o_j| in the tail model of
core/length_drift.py: the integrals behind `tail_drift(..., baseline="length_weighted")`.

The baseline couples every response's length to every advantage, so E[b S_X] (S_X the score
summed over the responses on tail X) is an integral over the batch's total length, written with
1/N = int e^(-l N) dl and the geometric tail's transforms (core/tail_laplace.py), per routing of the
group's responses to the two tails (`_own`). Arrays are (E,) prompts by (V,) quadrature nodes.
"""

from __future__ import annotations

import numpy as np

from grpo_dial.core.std_factor import std_factor
from grpo_dial.core.tail_laplace import NODES, WEIGHTS, binomial_pmf, tail_transforms


def _own(n, a, k, c, own, other, G):
    """The integrand (E, V) of E[b S_X | routing] = int e^(-l G c) [a ((c psi_X + chi_X)
    phi_X^(n-1) + (n-1)(c phi_X + eta_X) psi_X phi_X^(n-2)) phi_Y^(G-n) + (k-a) n (c phi_Y +
    eta_Y) psi_X phi_X^(n-1) phi_Y^(G-n-1)] dl (1/N = int e^(-l N) dl), n responses on tail X
    (a correct), G - n on Y (k - a correct); own / other: (phi, psi, eta, chi) of X and Y."""
    (phx, psx, etx, chx), (phy, _, ety, _) = own, other
    if n == 0:
        return np.zeros(phx.shape)
    same = (c * psx + chx) * phx ** (n - 1)
    same = same + ((n - 1) * (c * phx + etx) * psx * phx ** (n - 2) if n >= 2 else 0.0)
    cross = n * (c * phy + ety) * psx * phx ** (n - 1) * phy ** (G - n - 1) if n < G else 0.0
    return a * same * phy ** (G - n) + (k - a) * cross


def length_weighted_integrals(p, qw, qc, c, G, a, alpha, ddof, eps):
    """(2, E) E[b S_w / s_k] and E[b S_c / s_k] of the length-weighted baseline, interior k.
    _own is linear in its counts, own(n, a, k) = a X_n + (k - a) Y_n, so the integrals X_n, Y_n
    are taken once per n (not per k and routing) and weighted by E[a 1{n}] and E[(k - a) 1{n}]
    (a: correct responses among the n on the tail) of each n, summed over k / s_k."""
    pk = binomial_pmf(G, p)  # (E, G+1)
    cc = c[:, None]
    lam = NODES[None, :] / (G * cc)  # (E, V)
    tw, tc = tail_transforms(lam, qw[:, None]), tail_transforms(lam, qc[:, None])
    core = np.exp(-lam * G * cc) * WEIGHTS[None, :] / (G * cc)  # (E, V) with d lambda
    pi0, pi1 = (1 + a) / 2, (1 - a) / 2
    # on theta_w: n responses, m1 of them correct; so G - n on theta_c, k - m1 correct
    cw, kw = np.zeros((p.size, G + 1)), np.zeros((p.size, G + 1))  # E[m1 1{n}], E[k 1{n}]
    for k in range(1, G):
        weight = pk[:, k] / std_factor(np.sqrt(k * (G - k) / G / max(G - ddof, 1)), eps, alpha)
        f1, f0 = binomial_pmf(k, pi1), binomial_pmf(G - k, pi0)  # correct / wrong ones on theta_w
        for m1 in range(k + 1):
            w = (weight * f1[:, m1])[:, None] * f0  # (E, G-k+1): m0 = 0..G-k
            cw[:, m1 : m1 + G - k + 1] += w * m1
            kw[:, m1 : m1 + G - k + 1] += w * k
    jw, jc = np.zeros(p.size), np.zeros(p.size)
    for n in range(1, G + 1):  # n on theta_w: X = _own(n, 1, 1) and Y = _own(n, 0, 1)
        xw = (core * _own(n, 1, 1, cc, tw, tc, G)).sum(1)
        yw = (core * _own(n, 0, 1, cc, tw, tc, G)).sum(1)
        jw += cw[:, n] * xw + (kw[:, n] - cw[:, n]) * yw
    for n in range(0, G):  # G - n on theta_c, k - m1 of them correct
        xc = (core * _own(G - n, 1, 1, cc, tc, tw, G)).sum(1)
        yc = (core * _own(G - n, 0, 1, cc, tc, tw, G)).sum(1)
        jc += (kw[:, n] - cw[:, n]) * xc + cw[:, n] * yc
    return np.stack([jw, jc])
