"""Figures of the controlled Bernoulli-logit run (one panel per question, arms as colours)."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from grpo_dial.figures import label, palette, theme


def simulation_figure(
    steps: pd.DataFrame,
    prompts: pd.DataFrame,
    summary: pd.DataFrame,
    *,
    names: Mapping[str, str] | None = None,
) -> plt.Figure:
    """Mean p against samples; silent fraction against its closed form; extreme-prompt mass;
    final p by initial-difficulty quartile. Arms are shown by `label(arm, names)`."""
    theme()
    colors = palette(steps["arm"].unique(), names)
    show = partial(label, names=names)
    steps = steps.assign(
        arm=steps["arm"].map(show), samples_millions=steps["cumulative_samples"] / 1e6
    )
    prompts = prompts.assign(arm=prompts["arm"].map(show))
    fig, axes = plt.subplots(1, 4, figsize=(19, 4.3))

    sns.lineplot(
        data=steps, x="samples_millions", y="mean_p", hue="arm", palette=colors, ax=axes[0]
    )
    axes[0].set(
        xlabel="samples drawn (millions)",
        ylabel="mean pass rate over prompts",
        title="learning against samples spent",
    )

    sns.lineplot(
        data=steps,
        x="step",
        y="silent_fraction",
        hue="arm",
        palette=colors,
        ax=axes[1],
        legend=False,
    )
    sns.lineplot(
        data=steps,
        x="step",
        y="expected_silent_fraction",
        hue="arm",
        palette=colors,
        ax=axes[1],
        legend=False,
        linestyle="--",
    )
    axes[1].set(
        xlabel="step",
        ylabel="silent fraction (dashed: closed form)",
        title=r"measured vs $E[p^G + (1-p)^G]$",
    )

    sns.lineplot(
        data=steps,
        x="step",
        y="extreme_mass_share",
        hue="arm",
        palette=colors,
        ax=axes[2],
        legend=False,
    )
    axes[2].set(
        xlabel="step",
        ylabel="share of |update| on extreme prompts",
        title="0 < p < 0.1 or 0.9 < p < 1",
    )

    sns.barplot(
        data=prompts,
        x="initial_quartile",
        y="final_p",
        hue="arm",
        palette=colors,
        ax=axes[3],
        errorbar=None,
    )
    axes[3].set(
        xlabel="initial-difficulty quartile (1 = hardest)",
        ylabel="final mean p",
        ylim=(0, 1.05),
        title="where the arms end",
    )
    axes[3].get_legend().remove()  # same colours as the first panel's legend
    axes[0].legend(title=None, frameon=False, fontsize=8)

    by_arm = summary.set_index("arm")["hardest_quartile_final_p"]
    parts = [f"{show(arm)} {value:.2f}" for arm, value in by_arm.items()]
    fig.suptitle("Hardest initial quartile ends at mean p: " + ", ".join(parts), fontsize=11)
    fig.tight_layout()
    return fig
