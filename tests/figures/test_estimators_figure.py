"""The estimators' state figure, tested through the steps table behind it."""

from __future__ import annotations

import math

import matplotlib
import numpy as np
import pandas as pd
import pytest

matplotlib.use("Agg")

from grpo_dial.figures.estimators import estimator_panels, estimator_state_figure  # noqa: E402


def _steps(dials: dict[str, dict]) -> pd.DataFrame:
    rows = []
    for dial, values in dials.items():
        for seed in (0, 1):
            for step in range(1, 21):
                rows.append(
                    {
                        "dial": dial,
                        "seed": seed,
                        "step": step,
                        "accuracy": 0.3 + 0.01 * step,
                        "trained_groups": 16,
                        "lambda": values.get("lambda", lambda s: math.nan)(step),
                        "anchor": values.get("anchor", lambda s: math.nan)(step),
                        "strata_split_groups": values.get("split", lambda s: math.nan)(step),
                    }
                )
    return pd.DataFrame(rows)


def test_panels_are_the_quantities_some_run_has():
    plain = _steps({"grpo": {}})
    assert estimator_panels(plain) == []
    with pytest.raises(ValueError, match="no run"):
        estimator_state_figure(plain)
    mixed = _steps(
        {"grpo": {}, "lam": {"lambda": lambda s: 0.01 * s}, "ha": {"anchor": lambda s: 0.3}}
    )
    assert estimator_panels(mixed) == ["lambda", "anchor"]
    every = _steps({"st": {"split": lambda s: 8.0}, "lam": {"lambda": lambda s: -0.1}})
    assert estimator_panels(every) == ["lambda", "split_share"]


def test_figure_states_the_last_values_of_the_table():
    steps = _steps({"lam": {"lambda": lambda s: 0.05 * s}, "st": {"split": lambda s: 8.0}})
    fig = estimator_state_figure(steps)
    assert len(fig.axes) == 2
    title = fig._suptitle.get_text()
    last = steps[(steps["dial"] == "lam") & (steps["step"] > 18)]["lambda"].mean()
    assert f"lam lambda {last:.2f}" in title  # 0.05 * 19 and 20: 0.97 (never the smoothed curve)
    assert "st split share 0.50" in title  # 8 of 16 trained groups split
    assert np.isclose(last, 0.975)
