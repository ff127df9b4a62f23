"""What the newer estimators add per step, from the gathered steps table (`dial`, `seed`, `step`
and the columns `lambda`, `anchor`, `strata_split_groups`, `trained_groups`, `accuracy`).

One panel per quantity that some run has: lambda-GRPO's lambda over training (0 = DAPO's token
mean; > 0 favours longer responses), HA-DW's difficulty anchor C against the batch accuracy it
follows, and for stratified normalization the share of trained groups split into more than one
stratum (where stratifying changes an advantage at all). Lines are the mean over seeds with the
seeds' range as the band; per-step values are smoothed as in grpo_dial.figures.training.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from grpo_dial.figures import theme
from grpo_dial.figures.smoothing import smooth_runs

SMOOTH = 9
PANELS = {  # column -> (y label, panel title)
    "lambda": ("lambda", "lambda-GRPO: the learned length preference"),
    "anchor": ("anchor C (line) / batch accuracy (dashed)", "HA-DW: the difficulty anchor"),
    "split_share": ("share of trained groups", "Stratified: groups split into > 1 stratum"),
}


def estimator_panels(steps: pd.DataFrame) -> list[str]:
    """The PANELS some run of `steps` has values for (empty: no run uses a newer estimator)."""
    have = {
        "lambda": "lambda" in steps and steps["lambda"].notna().any(),
        "anchor": "anchor" in steps and steps["anchor"].notna().any(),
        "split_share": "strata_split_groups" in steps
        and steps["strata_split_groups"].notna().any(),
    }
    return [name for name in PANELS if have[name]]


def estimator_state_figure(steps: pd.DataFrame) -> plt.Figure:
    """lambda, anchor and strata split share over training, one panel each (those present)."""
    panels = estimator_panels(steps)
    if not panels:
        raise ValueError("no run has lambda, anchor or strata values to draw")
    theme()
    data = steps.assign(
        split_share=steps["strata_split_groups"]
        / steps["trained_groups"].where(steps["trained_groups"] > 0)
    )
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 3.6), squeeze=False)
    notes = []
    for ax, name in zip(axes[0], panels, strict=True):
        runs = data[data[name].notna()]
        cols = [name, "accuracy"] if name == "anchor" else [name]
        smoothed = smooth_runs(runs, cols, SMOOTH)
        sns.lineplot(data=smoothed, x="step", y=name, hue="dial", errorbar=("pi", 100), ax=ax)
        if name == "anchor":
            sns.lineplot(
                data=smoothed, x="step", y="accuracy", hue="dial", errorbar=None, ax=ax,
                linestyle="--", legend=False,
            )  # fmt: skip
        ax.set(xlabel="training step", ylabel=PANELS[name][0], title=PANELS[name][1])
        last = runs[runs["step"] > runs["step"].max() * 0.9].groupby("dial")[name].mean()
        notes += [f"{dial} {name.replace('_', ' ')} {v:.2f}" for dial, v in last.items()]
    fig.suptitle("Estimator state in the last 10% of steps: " + "; ".join(notes), y=1.03)
    fig.tight_layout()
    return fig
