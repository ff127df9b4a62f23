"""Figures of the RL runs, checked through what their tables say: panels per dial, the length
change in the title, the stacked terms, and the empty identity table."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib import pyplot as plt

from grpo_dial.figures import training


def _curves(n_steps=30):
    steps = np.arange(1, n_steps + 1)
    rows = []
    for dial in ("grpo", "dr_grpo"):
        for seed in (0, 1):
            rows.append(pd.DataFrame({
                "dial": dial, "seed": seed, "step": steps, "band": "all",
                "mean_len_correct": 20.0, "mean_len_incorrect": 20.0 + steps,
            }))  # fmt: skip
    return pd.concat(rows, ignore_index=True)


def test_length_curves_one_panel_per_dial_and_growth_in_the_title():
    fig = training.length_curves_figure(_curves())
    titles = sorted(ax.get_title() for ax in fig.axes)
    assert titles == ["dr_grpo", "grpo"]
    text = fig.texts[0].get_text()
    assert "correct ones by +0.0" in text
    growth = float(text.split("grow by ")[1].split(" ")[0])
    assert growth > 15  # incorrect responses grow by one character per step
    plt.close(fig)


def test_decomposition_stacks_the_terms_of_each_run():
    rows = []
    for seed, (mix, good, bad) in enumerate([(1.0, -2.0, 5.0), (0.5, 1.0, 3.0)]):
        total = mix + good + bad
        for q, v in (("mix", mix), ("within_correct", good), ("within_incorrect", bad)):
            rows.append(("grpo", seed, "term", q, v, v / total, np.nan, np.nan))
        rows.append(("grpo", seed, "term", "total", total, 1.0, total - 1, total + 1))
    terms = pd.DataFrame(rows, columns=["dial", "seed", "kind", "quantity", "value", "share",
                                        "lo", "hi"])  # fmt: skip
    fig = training.decomposition_figure(terms)
    ax = fig.axes[0]
    heights = sorted(round(p.get_height(), 6) for p in ax.patches)
    assert heights == sorted([1.0, -2.0, 5.0, 0.5, 1.0, 3.0])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["grpo\nseed 0", "grpo\nseed 1"]
    assert "Most of the length change sits in incorrect responses" in fig.texts[0].get_text()
    plt.close(fig)


def test_identity_figure_says_when_nothing_was_probed():
    fig = training.identity_figure(pd.DataFrame(columns=["dial", "seq_relative_residual",
                                                         "token_cosine"]))  # fmt: skip
    assert "could not be measured" in fig.texts[-1].get_text() or any(
        "could not be measured" in t.get_text() for t in fig.texts
    )
    plt.close(fig)
