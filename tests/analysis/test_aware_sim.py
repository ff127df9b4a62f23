"""The aware-tail task through the trainer's loss pieces (analysis/aware/tabular.py): the blind
variant's tail does not drift under any arm of config/length_aware.yaml, the aware one drifts
under GRPO by the closed form's amount (core/length_drift.tail_drift, derived independently),
and the constant normalizer leaves it alone."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from grpo_dial.analysis.aware.tabular import simulate_tail
from grpo_dial.analysis.seed_stats import t_interval
from grpo_dial.core.dial import read_arm
from grpo_dial.core.length_drift import tail_drift

CONFIG = Path(__file__).resolve().parents[2] / "config" / "length_aware.yaml"
ARMS = yaml.safe_load(CONFIG.read_text())["dials"]
SEEDS, STEPS, LR, CORE = 8, 30, 4.0, 5


def _drifts(spec: dict, ac: float, ae: float) -> np.ndarray:
    """(seeds, 2) drift of theta_= and theta_~ over STEPS steps."""
    dial = read_arm(spec, None, max_new_tokens=64).dial
    runs = [
        simulate_tail(
            dial, compute_accuracy=ac, estimate_accuracy=ae, core=CORE, steps=STEPS, lr=LR, seed=s
        )  # fmt: skip
        for s in range(SEEDS)
    ]
    return np.array([r[-1] - r[0] for r in runs])


def _interval(x: np.ndarray, level: float = 0.99) -> tuple[float, float]:
    return t_interval(x, level)[1:3]


@pytest.mark.parametrize("arm", sorted(ARMS))
def test_blind_tail_does_not_drift(arm):
    d = _drifts(ARMS[arm], 0.5, 0.5)
    for j in (0, 1):
        lo, hi = _interval(d[:, j])
        assert lo <= 0 <= hi, f"{arm}: blind drift interval [{lo:.3f}, {hi:.3f}] excludes 0"
        assert hi - lo < 0.4  # the interval is narrow enough to see GRPO's aware drift (~0.9)


def test_aware_grpo_drifts_as_the_closed_form_says():
    d = _drifts(ARMS["grpo"], 0.8, 0.2)
    # E[u] at the start (q = 3/4, |o| = core + T + stop: c = CORE + 1); q moves little in 30 steps
    u = tail_drift(0.5, 0.75, 0.75, CORE + 1, 8, 1.0, "sequence", 0.6)
    lo_w, hi_w = _interval(d[:, 1])
    lo_c, hi_c = _interval(d[:, 0])
    assert lo_w > 0 and hi_c < 0  # wrong-mode tail longer, right-mode shorter
    assert d[:, 1].mean() == pytest.approx(LR * STEPS * u.wrong, rel=0.25)
    assert d[:, 0].mean() == pytest.approx(LR * STEPS * u.correct, rel=0.25)


def test_aware_constant_normalizer_does_not_drift():
    d = _drifts(ARMS["dr_grpo"], 0.8, 0.2)
    lo, hi = _interval(d[:, 1])
    assert lo <= 0 <= hi
