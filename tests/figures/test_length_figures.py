"""Tests for figures/length_bias.py and figures/length_bias.py, through the tables."""

from __future__ import annotations

import numpy as np
import pandas as pd

from grpo_dial.core.arm_names import display_names
from grpo_dial.figures.length_bias import length_bias_figure, length_pressure_figure, pressure_title
from grpo_dial.figures.length_bias import title as bias_title

ARMS = ["grpo", "dr_grpo", "nostd_sequence"]
NAMES = {"grpo": "G-label", "nostd_sequence": "N-label"}  # dr_grpo unnamed: shown by its key


def _bias_tables():
    rows = []
    for arm, rate in zip(ARMS, [1.0, 0.0, 0.4], strict=True):
        for a in (0.0, 1.0):
            for step in range(5):
                d = 0.003 * rate * a
                rows.append(
                    dict(
                        arm=arm,
                        seed=0,
                        awareness=a,
                        step=step,
                        measured_drift_wrong=d,
                        predicted_drift_wrong=d,
                        measured_drift_correct=-d,
                        predicted_drift_correct=-d,
                        tail_wrong=4 + step * rate * a,
                        tail_correct=4 - 0.2 * step * rate * a,
                        realized_tail_wrong=4.0,
                    )
                )
    steps = pd.DataFrame(rows)
    summary = pd.DataFrame(
        [
            dict(
                arm=arm,
                awareness=a,
                measured_drift_wrong=0.003 * r * a,
                measured_drift_wrong_lo=0.0,
                measured_drift_wrong_hi=0.004,
                predicted_drift_wrong=0.003 * r * a,
                tail_wrong_start=4.0,
                tail_wrong_end=4 + 4 * r * a,
                tail_correct_start=4.0,
                tail_correct_end=4 - 0.8 * r * a,
                measured_ratio_to_grpo=r if a else np.nan,
                measured_ratio_to_grpo_lo=r,
                measured_ratio_to_grpo_hi=r,
                predicted_ratio_to_grpo=r if a else np.nan,
            )
            for arm, r in zip(ARMS, [1.0, 0.0, 0.4], strict=True)
            for a in (0.0, 1.0)
        ]
    )
    fit = pd.DataFrame({"path": ["wrong", "correct"], "r2": [0.97, 0.93]})
    curve = summary[["arm", "awareness", "predicted_drift_wrong"]].assign(predicted_drift_correct=0)
    return steps, summary, fit, curve


def test_length_bias_title_states_the_numbers_from_the_tables():
    steps, summary, fit, curve = _bias_tables()
    text = bias_title(summary, fit, names=NAMES)
    assert "4.0 -> 8.0" in text and "N-label at 0.40x" in text and "R^2 0.97" in text
    assert "nostd_sequence at 0.40x" in bias_title(summary, fit)  # no names: the key
    fig = length_bias_figure(steps, summary, fit, curve, names=NAMES)
    assert fig._suptitle.get_text() == text
    assert len(fig.axes) == 4
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert legend == ["G-label", "dr_grpo", "N-label"]
    assert [t.get_text() for t in fig.axes[3].get_xticklabels()] == legend


def test_length_pressure_title_says_whether_pressure_predicts_inflation():
    runs = pd.DataFrame(
        {
            "dial": ["grpo", "grpo", "dr_grpo", "dr_grpo"],
            "seed": [0, 1, 0, 1],
            "pressure_wrong": [0.5, 0.5, 0.0, 0.0],
            "wrong_length_change": [8.0, 8.2, 8.1, 7.9],
        }
    )
    null = pd.DataFrame([{"spearman_rho": 0.1, "inflation_gap": 0.1, "n_runs": 4}])
    assert "does not predict" in pressure_title(runs, null)
    real = pd.DataFrame([{"spearman_rho": 0.9, "inflation_gap": 5.0, "n_runs": 4}])
    assert pressure_title(runs, real).startswith("Length pressure predicts")
    steps = pd.DataFrame(
        {
            "dial": ["grpo"] * 3 + ["dr_grpo"] * 3,
            "seed": 0,
            "step": [0, 1, 2] * 2,
            "pressure_wrong": [0.5] * 3 + [0.0] * 3,
            "pressure_net": 0.0,
        }
    )
    fig = length_pressure_figure(steps, runs, null, names=NAMES)
    assert "does not predict" in fig._suptitle.get_text()
    legend = {t.get_text() for t in fig.axes[0].get_legend().get_texts()}
    assert legend == {"G-label", "dr_grpo"}


def test_length_bias_figure_draws_an_arm_without_a_closed_form():
    """lambda-GRPO's predicted columns are NaN (no closed form): the figure still draws its
    measured points and bars, and the title (from GRPO and alpha 0) is unchanged."""
    steps, summary, fit, curve = _bias_tables()
    lam = dict(arm="lambda_pos", predicted_drift_wrong=np.nan, predicted_drift_correct=np.nan)
    steps = pd.concat([steps, steps[steps["arm"] == "grpo"].assign(**lam)], ignore_index=True)
    extra = summary[summary["arm"] == "grpo"].assign(
        arm="lambda_pos", predicted_drift_wrong=np.nan, predicted_ratio_to_grpo=np.nan
    )
    summary2 = pd.concat([summary, extra], ignore_index=True)
    curve = pd.concat([curve, curve[curve["arm"] == "grpo"].assign(**lam)], ignore_index=True)
    fig = length_bias_figure(steps, summary2, fit, curve, names=display_names())
    assert fig._suptitle.get_text() == bias_title(summary, fit, names=display_names())
    labels = [t.get_text() for t in fig.axes[3].get_xticklabels()]
    assert display_names()["lambda_pos"] in labels
