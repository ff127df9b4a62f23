"""Adaptive against uniform group sizes, drawn from the allocation comparison's tables."""

from __future__ import annotations

from collections.abc import Mapping

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from grpo_dial.figures import theme


def allocation_figure(
    intervals: pd.DataFrame, by_band: pd.DataFrame, pairs: Mapping[str, str]
) -> plt.Figure:
    """Top: held-out sampled accuracy against samples spent, one panel per pair (`intervals`:
    mean over seeds and its t 95% interval per dial, mode and step). Bottom: mean G per prompt
    draw by base pass-rate band, bands in the order of `band`'s categories (an ordered
    categorical), else sorted."""
    theme()
    pairs = dict(pairs)
    fig, axes = plt.subplots(2, len(pairs), figsize=(4.2 * len(pairs), 6.6), squeeze=False)
    palette = {"adaptive": "#e69f00", "uniform": "#1f4e79"}
    gains = []
    for col, (adaptive, uniform) in enumerate(pairs.items()):
        arms = {adaptive: "adaptive", uniform: "uniform"}
        data = intervals[intervals["dial"].isin(arms) & (intervals["mode"] == "sampled")].copy()
        data["arm"] = data["dial"].map(arms)
        ax = axes[0, col]
        for arm, stats in data.sort_values("step").groupby("arm"):
            ax.plot(stats["samples"], stats["accuracy_mean"], marker="o", color=palette[arm],
                    label=arm)  # fmt: skip
            ax.fill_between(stats["samples"], stats["accuracy_lo"], stats["accuracy_hi"],
                            color=palette[arm], alpha=0.2, lw=0)  # fmt: skip
        ax.set(title=f"{adaptive} vs {uniform}", xlabel="samples spent", ylabel="held-out acc.")
        ax.legend(loc="lower right", fontsize=8)
        last = data[data["step"] == data["step"].max()].set_index("arm")["accuracy_mean"]
        if {"adaptive", "uniform"} <= set(last.index):
            gains.append(f"{adaptive} {last['adaptive'] - last['uniform']:+.3f}")

        bands = by_band[by_band["dial"].isin(arms)].copy()
        bands["arm"] = bands["dial"].map(arms)
        present = set(bands["band"])
        if isinstance(bands["band"].dtype, pd.CategoricalDtype):
            order = [b for b in bands["band"].cat.categories if b in present]
        else:
            order = sorted(present)
        sns.barplot(
            data=bands, x="band", y="mean_G", hue="arm", order=order, palette=palette,
            errorbar=("ci", 95), ax=axes[1, col],
        )  # fmt: skip
        axes[1, col].set(xlabel="base pass-rate band", ylabel="mean G per prompt draw")
        axes[1, col].legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=2, fontsize=8)
    fig.suptitle(
        "Equal samples per step; final held-out accuracy, adaptive minus uniform: "
        + (", ".join(gains) if gains else "n/a"),
        fontsize=11,
    )
    fig.tight_layout()
    return fig
