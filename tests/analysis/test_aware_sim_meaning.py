"""The tabular aware-tail simulation (analysis/aware/tabular.py) under DAPO's token mean: a dropped
silent group leaves the batch, so its tokens leave the normalizer S. At G = 2 half the groups
are silent, and the closed form with dropped groups (core/length_drift.tail_drift, silent
'drop', no redraw: the simulation does not refill) differs from the one that keeps them by a
factor 2.4; a fully aware task (compute always right, estimate always wrong, a = 1, p = 1/2)
resolves the difference in a few thousand steps."""

from __future__ import annotations

import numpy as np
import pytest

from grpo_dial.analysis.aware.tabular import simulate_tail
from grpo_dial.core.dial import preset
from grpo_dial.core.length_drift import tail_drift

CORE, STEPS, LR = 5, 6000, 1e-6  # lr so small that theta stays at log 3: q = 3/4 throughout


def test_dropped_silent_groups_leave_the_token_normalizer():
    dial = preset("dapo")
    theta = simulate_tail(
        dial, compute_accuracy=1.0, estimate_accuracy=0.0, core=CORE, steps=STEPS, groups=2,
        group_size=2, lr=LR, seed=0,
    )  # fmt: skip
    u = np.diff(theta, axis=0) / LR  # (steps, 2): per-step update of theta_=, theta_~
    mean, se = u.mean(0), u.std(0, ddof=1) / np.sqrt(STEPS)
    # |o| = core + tail + stop token: the closed form's core is CORE + 1
    common = dict(length_norm="token", awareness=1.0, scope="batch", n_groups=2, eps=dial.eps)
    drop = tail_drift(0.5, 0.75, 0.75, CORE + 1, 2, silent="drop", **common)
    keep = tail_drift(0.5, 0.75, 0.75, CORE + 1, 2, silent="keep", **common)
    assert float(drop.wrong) == pytest.approx(2.354 * float(keep.wrong), rel=1e-3)
    # theta_~ is the wrong path's (every "~" answer is wrong), theta_= the correct path's
    assert abs(mean[1] - float(drop.wrong)) < 4 * se[1]
    assert abs(mean[0] - float(drop.correct)) < 4 * se[0]
    assert abs(mean[1] - float(keep.wrong)) > 4 * se[1]  # the check has the power to tell
