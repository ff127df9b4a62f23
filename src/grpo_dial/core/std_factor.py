"""The std factor every group-relative advantage divides by, in one place:

    A_i = (r_i - mean_g) / s_g,    s_g = (sigma_g + eps) ** alpha,   alpha = std_power,

with s_g = 1 where it is 0 (a silent group at eps = 0: its numerator is exactly 0, so A = 0,
not 0/0). Works on numpy arrays and torch tensors alike (only arithmetic and comparisons), so
the estimator (core.advantage), the closed forms (core.length_drift) and the identity probe
(train.probe) compute the same number the same way.
"""

from __future__ import annotations


def std_factor(sigma, eps: float, alpha: float):
    """(sigma + eps) ** alpha, 1 where that is 0; exact: x * 1 + 0 == x for x > 0."""
    scale = (sigma + eps) ** alpha
    return scale * (scale > 0) + (scale <= 0)
