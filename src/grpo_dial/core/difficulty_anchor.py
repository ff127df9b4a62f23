"""HA-DW's evolving difficulty anchor (arXiv 2601.08521): a running belief C of the policy's
accuracy across batches, against which each prompt's group accuracy p_hat counts as hard or easy.
Three update rules (`Dial.anchor_update`), y_t the accuracy of the batch of step t (its mean
reward), C_t^- the anchor step t is weighed against, C_t^+ the belief after it:

- 'paper', Eqs. 8-11: C_t^- = C_{t-1}^+ (C_1^- = y_1: no history, the first batch is its own
  anchor) and C_t^+ = (1 - eta_t) C_t^- + eta_t y_t with eta_t = eta sigma_t, sigma_t the std of
  the previous m *beliefs* C_{t-1}^+ .. C_{t-m}^+ (Eq. 10; population std). Read literally a
  flat history (sigma = 0) never moves, and at t = 1 there is one belief; our warm-up, stated
  because the paper gives none: while fewer than m beliefs exist (t <= m), eta_t = 1/t, so
  C_t^+ = mean(y_1..y_t), the plain average of the accuracies so far; Eq. 10 from t = m + 1 on.
- 'released', the authors' code (github yangfengkai/HA-DW, `ray_trainer.py` keeps a deque of the
  last k batch accuracies, appended before the advantages; `core_algos.py` compares each group
  with their mean): C_t^- = mean(y_{t-k+1..t}), the current batch included; eta unused.
- 'batch_std': the paper's update with sigma_t the std of the last
  m batch *accuracies* y_{t-m+1..t} (current included) instead of the beliefs.

The state keeps C_{t-1}^+ and the last m values the rule needs (beliefs for 'paper', accuracies
otherwise), so a checkpoint stores it as numbers alone. The reweighting Phi that uses C is
grpo_dial.core.estimators.hadw_weights. Pure functions on floats: the trainer keeps the state.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

FORMS = ("paper", "released", "batch_std")


class AnchorState(NamedTuple):
    """C_{t-1}^+ (NaN before the first batch) and the rule's last values, oldest first: the
    beliefs C^+ ('paper') or the batch accuracies ('released', 'batch_std')."""

    value: float
    history: tuple[float, ...]


START = AnchorState(math.nan, ())


def _accuracy(y: float) -> float:
    if isinstance(y, bool) or not (isinstance(y, int | float) and 0 <= y <= 1):
        raise ValueError(f"batch accuracy must be a number in [0, 1], got {y!r}")
    return float(y)


def _window(window: object) -> int:
    if isinstance(window, bool) or not isinstance(window, int) or window < 2:
        raise ValueError(f"anchor window must be an integer >= 2, got {window!r}")
    return window


def _form(form: object) -> str:
    if form not in FORMS:
        raise ValueError(f"anchor update {form!r} is not valid; choose one of {', '.join(FORMS)}")
    return str(form)


def anchor_before(
    state: AnchorState, y: float, *, form: str = "paper", window: int | None = None
) -> float:
    """C_t^-: the anchor the batch with accuracy y is weighed against. 'paper' / 'batch_std':
    the previous belief (y itself at the start); 'released': the mean of the last `window`
    accuracies, y included."""
    y = _accuracy(y)
    if _form(form) == "released":
        return float(np.mean((*state.history, y)[-_window(window) :]))
    return y if math.isnan(state.value) else state.value


def anchor_update(
    state: AnchorState, y: float, rate: float, window: int, *, form: str = "paper"
) -> AnchorState:
    """The state after the batch with accuracy y under rule `form` (module docstring)."""
    if isinstance(rate, bool) or not (isinstance(rate, int | float) and 0 < rate <= 1):
        raise ValueError(f"anchor rate must be in (0, 1], got {rate!r}")
    window, form = _window(window), _form(form)
    prior = anchor_before(state, y, form=form, window=window)
    y = float(y)
    if form == "released":
        history = (*state.history, y)[-window:]
        return AnchorState(prior, history)  # prior is already the mean of this history
    if form == "batch_std":
        history = (*state.history, y)[-window:]
        eta = rate * float(np.std(history))  # <= rate / 2: accuracies lie in [0, 1]
        return AnchorState((1 - eta) * prior + eta * y, history)
    # 'paper': sigma over the previous m beliefs; the running mean until m of them exist
    n = len(state.history)
    eta = 1 / (n + 1) if n < window else rate * float(np.std(state.history[-window:]))
    value = (1 - eta) * prior + eta * y
    return AnchorState(value, (*state.history, value)[-window:])
