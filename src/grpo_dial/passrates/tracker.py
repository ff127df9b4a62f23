"""A running estimate of each training prompt's pass rate, from the groups the run samples.

The state is two arrays over the pool: discounted counts of correct (a) and wrong (b) responses.
Prior: a0 = s p_hat, b0 = s (1 - p_hat) from the base policy's pass-rate table, with strength
s = min(prior_strength, n) pseudo-responses (n = the table's samples of that prompt, when the table
has an n column); a prompt the table does not list starts at a0 = b0 = 0 (no evidence).
Update, when a step observes k correct of n responses to a prompt (all its groups that step):
    a <- decay a + k,   b <- decay b + (n - k)
so evidence from an older policy fades geometrically (decay = 1 keeps every response; the
effective memory is about 1 / (1 - decay) visits).
Estimate: the Krichevsky-Trofimov (Jeffreys posterior) mean p = (a + 1/2) / (a + b + 1), always
strictly inside (0, 1). A prompt counts as unanimous (its estimated p is 0 or 1) when all its
evidence is one-sided, a = 0 or b = 0, and there is some, a + b >= 1.

Pure functions on numpy arrays: the trainer keeps the arrays and stores them in its checkpoint.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd


def tracker_prior(
    prompt_ids: Sequence[str], pass_rates: pd.DataFrame | None, prior_strength: float
) -> tuple[np.ndarray, np.ndarray]:
    """(a0, b0), each (J,), for the pool `prompt_ids` from a passrates table (prompt_id, p_hat
    and, when present, n)."""
    if not (np.isfinite(prior_strength) and prior_strength >= 0):
        raise ValueError(f"prior_strength must be a finite number >= 0, got {prior_strength!r}")
    a = np.zeros(len(prompt_ids))  # (J,)
    b = np.zeros(len(prompt_ids))  # (J,)
    if pass_rates is None or prior_strength == 0:
        return a, b
    for col in ("prompt_id", "p_hat"):
        if col not in pass_rates.columns:
            raise ValueError(f"pass_rates table lacks column {col!r}")
    table = pass_rates.drop_duplicates("prompt_id").set_index("prompt_id")
    rows = table.reindex(pd.Index([str(p) for p in prompt_ids]))
    p = rows["p_hat"].to_numpy(float)  # (J,) NaN where the table does not list the prompt
    n = rows["n"].to_numpy(float) if "n" in rows else np.full(p.shape, np.inf)  # (J,)
    listed = np.isfinite(p) & (np.nan_to_num(n, nan=0.0) > 0)  # (J,)
    s = np.minimum(float(prior_strength), np.nan_to_num(n, nan=0.0))  # (J,)
    a[listed], b[listed] = (s * p)[listed], (s * (1 - p))[listed]
    return a, b


def tracker_update(
    a: np.ndarray, b: np.ndarray, index: np.ndarray, correct: np.ndarray, decay: float
) -> tuple[np.ndarray, np.ndarray]:
    """New (a, b) after one step's responses: response i answered pool prompt index[i] and was
    correct[i] (0/1). Prompts seen this step decay once, then add their counts; others keep."""
    if not 0 < decay <= 1:
        raise ValueError(f"decay must be in (0, 1], got {decay!r}")
    index = np.asarray(index, dtype=np.int64)  # (N,)
    correct = np.asarray(correct, dtype=float)  # (N,)
    if index.shape != correct.shape:
        raise ValueError(f"index and correct differ in shape: {index.shape} vs {correct.shape}")
    if index.size and (index.min() < 0 or index.max() >= a.size):
        raise ValueError(f"prompt index out of range 0..{a.size - 1}")
    k = np.bincount(index, weights=correct, minlength=a.size)  # (J,)
    n = np.bincount(index, minlength=a.size).astype(float)  # (J,)
    seen = n > 0  # (J,)
    return np.where(seen, decay * a + k, a), np.where(seen, decay * b + (n - k), b)


def tracker_estimate(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(J,) estimated pass rates (a + 1/2) / (a + b + 1), strictly inside (0, 1)."""
    return (np.asarray(a) + 0.5) / (np.asarray(a) + np.asarray(b) + 1.0)


def tracker_unanimous(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(J,) bool: every piece of evidence one-sided (a = 0 or b = 0) and at least one response."""
    a, b = np.asarray(a), np.asarray(b)
    return ((a == 0) | (b == 0)) & (a + b >= 1)
