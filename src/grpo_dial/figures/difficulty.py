"""Difficulty figures of one pass-rate table: histogram, gradient-mass shares, silent fractions."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from grpo_dial.figures import label, palette, theme


def _share(mass: pd.DataFrame, band_prefix: str, recipe: str) -> float:
    rows = mass[mass["band"].str.startswith(band_prefix) & (mass["recipe"] == recipe)]
    return float(rows["share"].iloc[0]) if len(rows) else float("nan")


def difficulty_figure(
    histogram: pd.DataFrame,
    mass: pd.DataFrame,
    silent: pd.DataFrame,
    *,
    names: Mapping[str, str] | None = None,
) -> plt.Figure:
    """Three panels: pass-rate histogram; share of gradient mass by decile; silent fraction vs G.
    Recipes are shown by `label(recipe, names)`."""
    theme()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    name = str(histogram["table"].iloc[0])

    bins = histogram[histogram["kind"] == "bin"]
    axes[0].bar(
        bins["bin_lo"],
        bins["fraction"],
        width=bins["bin_hi"] - bins["bin_lo"],
        align="edge",
        color="#8da0cb",
        edgecolor="white",
    )
    ends = histogram[histogram["kind"] != "bin"].set_index("kind")["fraction"]
    axes[0].set(
        xlabel="pass rate p_hat",
        ylabel="fraction of prompts",
        title=f"never solved {ends.get('never', 0):.1%}, always {ends.get('always', 0):.1%}",
    )

    deciles = mass[mass["band"].str.startswith("decile")]
    colors = palette(deciles["recipe"].unique(), names)
    deciles = deciles.assign(recipe=deciles["recipe"].map(partial(label, names=names)))
    sns.barplot(data=deciles, x="band", y="share", hue="recipe", palette=colors, ax=axes[1])
    axes[1].set(
        xlabel="pass-rate decile",
        ylabel="share of total gradient mass",
        title="GRPO weight sqrt(p(1-p)), Dr. GRPO weight p(1-p)",
    )
    axes[1].tick_params(axis="x", rotation=60, labelsize=7)
    axes[1].legend(title=None, frameon=False)

    sns.lineplot(
        data=silent,
        x="G",
        y="silent_fraction",
        style="method",
        markers=True,
        color="#444444",
        ax=axes[2],
    )
    axes[2].set(
        xscale="log",
        xlabel="group size G",
        ylabel="fraction of silent groups",
        ylim=(0, 1),
        title="closed form and without-replacement subsampling",
    )
    axes[2].set_xticks(sorted(silent["G"].unique()), labels=sorted(silent["G"].unique()))
    axes[2].minorticks_off()
    axes[2].legend(title=None, frameon=False)

    grpo, dr = _share(mass, "extreme", "grpo"), _share(mass, "extreme", "dr_grpo")
    at8 = silent[(silent["G"] == 8) & (silent["method"] == "closed_form")]["silent_fraction"]
    silent8 = f"; {at8.iloc[0]:.0%} of groups silent at G = 8" if len(at8) else ""
    fig.suptitle(
        f"{name}: extreme prompts get {grpo:.1%} of GRPO's gradient mass against "
        f"{dr:.1%} of Dr. GRPO's{silent8}",
        fontsize=11,
    )
    fig.tight_layout()
    return fig
