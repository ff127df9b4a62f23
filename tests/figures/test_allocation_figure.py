"""The allocation figure draws what its tables say: one line per arm through the seed means,
the bands in the order of the table's categories, the final gain in the title."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib import pyplot as plt

from grpo_dial.analysis.allocation import curve_intervals, ordered_bands
from grpo_dial.figures.allocation import allocation_figure

CURVES = pd.DataFrame(
    [(dial, seed, step, 8.0 * step * (seed + 1), "sampled", acc + 0.01 * seed)
     for dial, base in (("grpo_adaptive", 0.3), ("grpo", 0.2))
     for seed in (0, 1)
     for step, acc in ((0, 0.1), (2, base), (4, base + 0.1))]
    + [("grpo", 0, 4, 64.0, "greedy", 0.9)],
    columns=["dial", "seed", "step", "samples", "mode", "accuracy"],
)  # fmt: skip
BY_BAND = pd.DataFrame({
    "dial": ["grpo_adaptive"] * 4 + ["grpo"] * 4,
    "seed": 0,
    "band": ["other", "never", "unrated", "medium"] * 2,
    "mean_G": [6.0, 2.0, 4.0, 12.0, 8.0, 8.0, 8.0, 8.0],
})  # fmt: skip


def test_lines_follow_the_interval_table_and_title_states_the_gain():
    intervals = curve_intervals(CURVES)
    fig = allocation_figure(intervals, ordered_bands(BY_BAND), {"grpo_adaptive": "grpo"})
    ax = fig.axes[0]
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert set(lines) == {"adaptive", "uniform"}
    for arm, dial in (("adaptive", "grpo_adaptive"), ("uniform", "grpo")):
        rows = intervals[(intervals["dial"] == dial) & (intervals["mode"] == "sampled")]
        np.testing.assert_allclose(lines[arm].get_xdata(), rows["samples"])
        np.testing.assert_allclose(lines[arm].get_ydata(), rows["accuracy_mean"])
    assert "grpo_adaptive +0.100" in fig.texts[0].get_text()  # 0.405 - 0.305 at the last step
    plt.close(fig)


def test_bands_in_pass_rate_order_then_the_rest():
    pairs = {"grpo_adaptive": "grpo"}
    fig = allocation_figure(curve_intervals(CURVES), ordered_bands(BY_BAND), pairs)
    ticks = [t.get_text() for t in fig.axes[1].get_xticklabels()]
    assert ticks == ["never", "medium", "other", "unrated"]
    plt.close(fig)
    fig = allocation_figure(curve_intervals(CURVES), BY_BAND, pairs)
    assert [t.get_text() for t in fig.axes[1].get_xticklabels()] == sorted(set(BY_BAND["band"]))
    plt.close(fig)
