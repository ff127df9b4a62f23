"""The estimators' state figure, tested through the steps table behind it."""

from __future__ import annotations

import math

import matplotlib
import numpy as np
import pandas as pd

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


PANELS = {"lambda": "lambda-GRPO (learnable)", "anchor": "HA-DW, Eq. 10 anchor",
          "strata_split_groups": "Stratified GRPO"}  # column -> title, as column_labels gives


def test_panels_are_the_columns_some_run_has_in_the_given_order():
    plain = _steps({"grpo": {}})
    assert estimator_panels(plain, PANELS) == []
    fig = estimator_state_figure(plain, PANELS)  # no column logged: said, not raised
    assert "none of lambda, anchor, strata_split_groups was logged" in fig._suptitle.get_text()
    mixed = _steps(
        {"grpo": {}, "lam": {"lambda": lambda s: 0.01 * s}, "ha": {"anchor": lambda s: 0.3}}
    )
    assert estimator_panels(mixed, PANELS) == ["lambda", "anchor"]
    every = _steps({"st": {"split": lambda s: 8.0}, "lam": {"lambda": lambda s: -0.1}})
    assert estimator_panels(every, PANELS) == ["lambda", "strata_split_groups"]
    assert estimator_panels(every, {"strata_split_groups": "S", "lambda": "L"}) == [
        "strata_split_groups", "lambda"
    ]  # fmt: skip
    assert estimator_panels(every, {"not_logged": "X"}) == []


def test_figure_states_the_last_values_of_the_table_under_display_names():
    steps = _steps({"lam": {"lambda": lambda s: 0.05 * s}, "st": {"split": lambda s: 8.0}})
    fig = estimator_state_figure(steps, PANELS, names={"lam": "Lambda arm"})
    assert [ax.get_title() for ax in fig.axes] == ["lambda-GRPO (learnable)", "Stratified GRPO"]
    title = fig._suptitle.get_text()
    last = steps[(steps["dial"] == "lam") & (steps["step"] > 18)]["lambda"].mean()
    assert f"Lambda arm lambda {last:.2f}" in title  # 0.05 * 19 and 20 (never the smoothed curve)
    assert "st strata split groups 8.00" in title  # no name given: the key
    assert np.isclose(last, 0.975)
