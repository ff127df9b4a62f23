"""Adaptive against uniform group sizes, drawn from the allocation comparison's tables."""

from __future__ import annotations

from collections.abc import Mapping

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from grpo_dial.analysis.allocation_compare import t_interval
from grpo_dial.figures import theme
from grpo_dial.train.records import PASS_RATE_BANDS


def allocation_figure(
    curves: pd.DataFrame, by_band: pd.DataFrame, pairs: Mapping[str, str]
) -> plt.Figure:
    """Top: held-out sampled accuracy against samples spent, one panel per pair (mean over
    seeds, band = t 95% interval). Bottom: mean G per prompt draw by base pass-rate band."""
    theme()
    pairs = dict(pairs)
    fig, axes = plt.subplots(2, len(pairs), figsize=(4.2 * len(pairs), 6.6), squeeze=False)
    palette = {"adaptive": "#e69f00", "uniform": "#1f4e79"}
    gains = []
    for col, (adaptive, uniform) in enumerate(pairs.items()):
        arms = {adaptive: "adaptive", uniform: "uniform"}
        data = curves[curves["dial"].isin(arms) & (curves["mode"] == "sampled")].copy()
        data["arm"] = data["dial"].map(arms)
        ax = axes[0, col]
        for arm, part in data.groupby("arm"):
            stats = part.groupby("step").agg(
                samples=("samples", "mean"),
                ci=("accuracy", lambda a: t_interval(a.to_numpy())),
            )
            mean = stats["ci"].map(lambda c: c[0])
            lo, hi = stats["ci"].map(lambda c: c[1]), stats["ci"].map(lambda c: c[2])
            ax.plot(stats["samples"], mean, marker="o", color=palette[arm], label=arm)
            ax.fill_between(stats["samples"], lo, hi, color=palette[arm], alpha=0.2, lw=0)
        ax.set(title=f"{adaptive} vs {uniform}", xlabel="samples spent", ylabel="held-out acc.")
        ax.legend(loc="lower right", fontsize=8)
        last = data[data["step"] == data["step"].max()].groupby("arm")["accuracy"].mean()
        if {"adaptive", "uniform"} <= set(last.index):
            gains.append(f"{adaptive} {last['adaptive'] - last['uniform']:+.3f}")

        bands = by_band[by_band["dial"].isin(arms)].copy()
        bands["arm"] = bands["dial"].map(arms)
        order = [b for b in PASS_RATE_BANDS if b in set(bands["band"])]
        order += sorted(set(bands["band"]) - set(order))
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
