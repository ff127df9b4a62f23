"""One figure per imported run: length by correctness, silent groups against the closed form,
and the length decomposition."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from grpo_dial.figures import theme
from grpo_dial.figures.smoothing import rolling_mean
from grpo_dial.figures.training import TERM_COLORS, TERM_LABELS

SMOOTH = 5  # steps in the rolling mean of per-step curves
SMOOTHED = f"step (curves smoothed over {SMOOTH} steps)"  # x label of the per-step panels


def _rolling(series: pd.Series) -> pd.Series:
    return rolling_mean(series, SMOOTH)


def external_figure(name: str, curves: pd.DataFrame, silent: pd.DataFrame,
                    terms: pd.DataFrame) -> plt.Figure:  # fmt: skip
    """Three panels: mean length of correct and incorrect responses per step; silent fraction
    split into all-correct and all-wrong against the unbiased closed form at the observed pass
    rates (`silent`'s unbiased_* columns); the three-term split of the length change with the
    total's interval. Per-step curves are centred rolling means over SMOOTH steps, and the x
    label of their panels says so."""
    theme()
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.2))
    rows = curves[curves["band"] == "all"].sort_values("step")
    axes[0].plot(rows["step"], _rolling(rows["mean_len_correct"]), color="#4f8f3a", label="correct")
    axes[0].plot(rows["step"], _rolling(rows["mean_len_incorrect"]), color="#c0504d",
                 label="incorrect")  # fmt: skip
    axes[0].set(xlabel=SMOOTHED, ylabel="mean response length", title="length by correctness")
    axes[0].legend(frameon=False)

    s = silent.sort_values("step")
    axes[1].plot(s["step"], _rolling(s["all_correct_fraction"]), color="#1f4e79",
                 label="all correct")  # fmt: skip
    axes[1].plot(s["step"], _rolling(s["all_wrong_fraction"]), color="#c0504d", label="all wrong")
    axes[1].plot(s["step"], _rolling(s["unbiased_all_correct"]), color="#1f4e79", ls="--", lw=1)
    axes[1].plot(s["step"], _rolling(s["unbiased_all_wrong"]), color="#c0504d", ls="--", lw=1)
    axes[1].set(xlabel=SMOOTHED, ylabel="fraction of groups",
                title="silent groups (dashed: closed form at observed p)")  # fmt: skip
    axes[1].legend(frameon=False)

    t = terms[terms["kind"] == "term"].set_index("quantity")
    names = list(TERM_COLORS)
    values = [t.loc[n, "value"] for n in names]
    lo = [t.loc[n, "value"] - t.loc[n, "lo"] for n in names]
    hi = [t.loc[n, "hi"] - t.loc[n, "value"] for n in names]
    axes[2].bar(range(3), values, yerr=[lo, hi], capsize=4,
                color=[TERM_COLORS[n] for n in names])  # fmt: skip
    axes[2].axhline(0, color="black", lw=0.8)
    axes[2].set_xticks(range(3), [TERM_LABELS[n] for n in names], fontsize=8)
    total = t.loc["total"]
    axes[2].set(ylabel="change in mean length", title=f"total {total['value']:+.1f} "
                f"[{total['lo']:+.1f}, {total['hi']:+.1f}]")  # fmt: skip
    share = t.loc["within_incorrect", "share"]
    fig.suptitle(
        f"{name}: {share:.0%} of the length change sits in incorrect responses"
        if np.isfinite(share) else f"{name}: no length change to split",
        fontsize=11,
    )  # fmt: skip
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    return fig
