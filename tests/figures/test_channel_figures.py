"""The channel and tail-drift figures draw what their tables say: the curves are the seed means,
the predicted band is the table's, the titles state the numbers, and the arms are named by the
table handed in (their keys without one)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from matplotlib import pyplot as plt

from grpo_dial.figures.channel import channel_figure, length_drift_runs_figure

AWARE = pd.DataFrame(
    [(d, s, step, 0.5 + 0.01 * step * (d == "grpo") + 0.01 * s, float(step), 20.0 + s, 20.0)
     for d in ("grpo", "dr_grpo") for s in (0, 1) for step in range(4)],
    columns=["dial", "seed", "step", "auc_tail", "gap", "mean_tail_wrong", "mean_tail_correct"],
)  # fmt: skip
CHANNEL = pd.DataFrame(
    {"dial": ["base", "grpo", "grpo", "dr_grpo"], "seed": [-1, 0, 1, 0],
     "sensitivity": [0.25, 0.5, 0.7, 0.2], "false_alarm": [0.05, 0.1, 0.1, 0.0],
     "continue_gap": [0.0, 0.1, 0.3, 0.0], "auc_tail": [0.51, 0.6, 0.6, 0.5]}
)  # fmt: skip
NAMES = {"grpo": "G-label", "dr_grpo": "D-label", "nostd_sequence": "N-label"}  # not the project's


def _ticks(ax) -> list[str]:
    return [t.get_text() for t in ax.get_xticklabels()]


def test_channel_figure_curves_and_title() -> None:
    fig = channel_figure(CHANNEL, AWARE, names=NAMES)
    tails = {ln.get_label(): ln for ln in fig.axes[0].get_lines()}
    np.testing.assert_allclose(tails["G-label"].get_ydata(), 20.5)  # wrong tails, seed mean
    lines = {ln.get_label(): ln for ln in fig.axes[1].get_lines()}
    np.testing.assert_allclose(lines["G-label"].get_ydata(), 0.505 + 0.01 * np.arange(4))
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == ["G-label", "D-label"]
    bars = [p.get_height() for p in fig.axes[3].patches]
    assert bars[:3] == [0.25, 0.6, 0.2]  # sensitivity of base, grpo (seed mean), dr_grpo
    assert _ticks(fig.axes[3]) == ["base", "G-label", "D-label"]  # 'base' has no name: its key
    title = fig.texts[0].get_text()
    assert "25% of wrong answers' checks disagree" in title and "0.51 at the base" in title
    plt.close(fig)


@pytest.mark.parametrize(("names", "shown"), [({"grpo": "GRPO"}, "GRPO"), (None, "grpo")])
def test_channel_figure_shows_the_names_handed_in_else_the_keys(names, shown) -> None:
    """The same tables drawn twice: with names={'grpo': 'GRPO'} the arm reads GRPO wherever it is
    named (legend, bar ticks); without names, its key grpo. dr_grpo has no name either way."""
    fig = channel_figure(CHANNEL, AWARE, names=names)
    assert [ln.get_label() for ln in fig.axes[1].get_lines()][:2] == [shown, "dr_grpo"]
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == [shown, "dr_grpo"]
    assert _ticks(fig.axes[3]) == ["base", shown, "dr_grpo"]
    plt.close(fig)


def _drift(grpo_lo: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    drift = pd.DataFrame(
        {"dial": ["grpo", "nostd_sequence", "dr_grpo"], "quantity": "gap_drift",
         "mean": [2.0, 1.0, 0.1], "lo": [grpo_lo, 0.2, -0.5], "hi": [3.0, 1.8, 0.7],
         "n_seeds": 3, "ratio_lo": [1.0, 0.4, 0.0], "ratio_hi": [1.0, 0.4, 0.0],
         "predicted_lo": [2.0, 0.8, 0.0], "predicted_hi": [2.0, 0.8, 0.0],
         "measured_ratio": [1.0, 0.5, 0.05]}
    )  # fmt: skip
    runs = pd.DataFrame({"dial": np.repeat(drift["dial"], 3).to_numpy(), "seed": [0, 1, 2] * 3,
                         "gap_drift": np.repeat(drift["mean"], 3).to_numpy()})  # fmt: skip
    return drift, runs


def test_drift_figure_draws_prediction_next_to_measurement() -> None:
    drift, runs = _drift(grpo_lo=1.0)
    fig = length_drift_runs_figure(drift, runs, names=NAMES)
    assert len(fig.axes) == 2  # one panel per arm paired with GRPO
    ax = fig.axes[0]
    predicted = [ln for ln in ax.get_lines() if ln.get_label() == "predicted"][0]
    assert predicted.get_ydata().tolist() == [0.8, 0.8]
    assert ax.get_title() == "N-label: ratio predicted 0.40,\nmeasured 0.50"
    assert _ticks(ax) == ["G-label", "N-label", "predicted"]
    assert _ticks(fig.axes[1]) == ["G-label", "D-label", "predicted"]
    title = fig.texts[0].get_text()
    assert title.startswith("G-label's tail drift +2.00 [+1.00, +3.00]: the length bias acts")
    plt.close(fig)
    fig = length_drift_runs_figure(*_drift(grpo_lo=-0.1))
    assert fig.texts[0].get_text().startswith("grpo's tail drift")  # no names: the keys
    assert _ticks(fig.axes[0]) == ["grpo", "nostd_sequence", "predicted"]
    assert "no drift beyond seed noise" in fig.texts[0].get_text()
    plt.close(fig)
