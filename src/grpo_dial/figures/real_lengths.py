"""Length of correct against incorrect responses in real logged model outputs."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from grpo_dial.figures import theme


def real_lengths_figure(table: pd.DataFrame) -> plt.Figure:
    """Mean length of correct and incorrect responses by difficulty, one panel per source."""
    theme()
    sources = list(table["source"].unique())
    fig, axes = plt.subplots(1, len(sources), figsize=(6 * len(sources), 4.2), squeeze=False)
    for ax, source in zip(axes[0], sources, strict=True):
        rows = table[table["source"] == source].sort_values("difficulty")
        x = range(len(rows))
        ax.bar([i - 0.2 for i in x], rows["mean_len_correct"], width=0.4, color="#4f8f3a",
               label="correct")  # fmt: skip
        ax.bar([i + 0.2 for i in x], rows["mean_len_incorrect"], width=0.4, color="#c0504d",
               label="incorrect")  # fmt: skip
        ax.set_xticks(list(x), rows["difficulty"])
        ax.set(xlabel="difficulty", ylabel="mean length (characters)", title=source)
        ax.legend(frameon=False, fontsize=8)
    pooled = []
    for source in sources:
        rows = table[table["source"] == source]
        diff = rows["diff"].dropna()
        if len(diff):
            pooled.append(f"{source}: wrong minus right {diff.min():+.0f} to {diff.max():+.0f}")
    fig.suptitle(
        "Within a difficulty level, wrong answers are not uniformly longer (" + "; ".join(pooled)
        + " characters)", fontsize=11,
    )  # fmt: skip
    fig.tight_layout()
    return fig
