"""HA-DW's evolving difficulty anchor (arXiv 2601.08521): a running belief C of the policy's
accuracy across batches, against which each prompt's group accuracy p_hat counts as hard or easy.

Update after the batch of step t with accuracy y_t (mean reward of the batch's responses):

    C_t^- = C_{t-1}^+            (C_1^- = y_1: no history yet, so the first batch is its own anchor)
    C_t^+ = (1 - eta_t) C_t^- + eta_t y_t,    eta_t = eta sigma_t,

with sigma_t the population std of the last m batch accuracies y_{t-m+1..t}: the anchor follows
faster while the accuracy moves and holds while it is stable (the paper's "adaptive forgetting";
TRL PR #4872 writes eta_t = eta sigma_t). Our reading of sigma_t, stated because the paper's
description leaves the window open: m = dial.anchor_window, the batch accuracies themselves.
The reweighting Phi that uses C is grpo_dial.core.estimators.hadw_weights. Pure functions on
floats: the trainer keeps the state and stores it in its checkpoint.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np


class AnchorState(NamedTuple):
    """C_{t-1}^+ (NaN before the first batch) and the last batch accuracies, oldest first."""

    value: float
    history: tuple[float, ...]


START = AnchorState(math.nan, ())


def _accuracy(y: float) -> float:
    if isinstance(y, bool) or not (isinstance(y, int | float) and 0 <= y <= 1):
        raise ValueError(f"batch accuracy must be a number in [0, 1], got {y!r}")
    return float(y)


def anchor_before(state: AnchorState, y: float) -> float:
    """C_t^-: the anchor this batch is weighed against (the batch's own accuracy at the start)."""
    y = _accuracy(y)
    return y if math.isnan(state.value) else state.value


def anchor_update(state: AnchorState, y: float, rate: float, window: int) -> AnchorState:
    """The state after the batch with accuracy y: C^+ = (1 - eta sigma_t) C^- + eta sigma_t y."""
    if isinstance(rate, bool) or not (isinstance(rate, int | float) and 0 < rate <= 1):
        raise ValueError(f"anchor rate must be in (0, 1], got {rate!r}")
    if isinstance(window, bool) or not isinstance(window, int) or window < 2:
        raise ValueError(f"anchor window must be an integer >= 2, got {window!r}")
    prior = anchor_before(state, y)
    history = (*state.history, _accuracy(y))[-window:]
    eta = rate * float(np.std(history))  # <= rate / 2: accuracies lie in [0, 1]
    return AnchorState((1 - eta) * prior + eta * y, history)
