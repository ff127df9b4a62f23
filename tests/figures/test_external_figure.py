"""The imported-run figure draws the smoothed per-step curves of its tables and names the
incorrect responses' share of the length change."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib import pyplot as plt

from grpo_dial.figures.external import SMOOTH, external_figure
from grpo_dial.figures.smoothing import rolling_mean


def test_external_figure_lines_and_title():
    steps = np.arange(1, 11)
    curves = pd.DataFrame(
        {
            "step": steps[::-1],
            "band": "all",
            "mean_len_correct": 10.0 + steps[::-1],
            "mean_len_incorrect": 30.0,
        }
    )
    silent = pd.DataFrame({"step": steps, "all_correct_fraction": steps / 20,
                           "all_wrong_fraction": 0.1, "unbiased_all_correct": 0.2,
                           "unbiased_all_wrong": 0.1})  # fmt: skip
    terms = pd.DataFrame({
        "kind": "term", "quantity": ["mix", "within_correct", "within_incorrect", "total"],
        "value": [1.0, 1.0, 2.0, 4.0], "share": [0.25, 0.25, 0.5, 1.0],
        "lo": [0.0, 0.0, 1.0, 3.0], "hi": [2.0, 2.0, 3.0, 5.0],
    })  # fmt: skip
    fig = external_figure("trl_run", curves, silent, terms)
    correct = next(line for line in fig.axes[0].get_lines() if line.get_label() == "correct")
    np.testing.assert_allclose(correct.get_xdata(), steps)  # sorted by step
    np.testing.assert_allclose(correct.get_ydata(), rolling_mean(pd.Series(10.0 + steps), SMOOTH))
    assert fig.axes[2].get_title() == "total +4.0 [+3.0, +5.0]"
    for axis in fig.axes[:2]:  # the per-step curves say they are smoothed, and over how much
        assert f"smoothed over {SMOOTH} steps" in axis.get_xlabel()
    title = fig.texts[0].get_text()
    assert title == "trl_run: 50% of the length change sits in incorrect responses"
    plt.close(fig)
