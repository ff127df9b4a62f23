"""What the registered estimators log per step, from the gathered steps table (`dial`, `seed`,
`step` and each estimator's logged columns).

One panel per logged column that some run has values for, titled with the estimator that logs it
(the stage passes the registry's columns and labels: a newly registered estimator's column gets
its panel with no change here); a column no run has is skipped, and with none the figure says so.
Lines are the mean over seeds with the seeds' range as the band; per-step values are smoothed as
in grpo_dial.figures.training.
"""

from __future__ import annotations

from collections.abc import Mapping

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from grpo_dial.figures import label, palette, shown, theme
from grpo_dial.figures.smoothing import smooth_runs

SMOOTH = 9


def estimator_panels(steps: pd.DataFrame, panels: Mapping[str, str]) -> list[str]:
    """The columns of `panels` (column -> title) that some run of `steps` has values for, in
    `panels`' order (empty: no run logged any)."""
    return [c for c in panels if c in steps and steps[c].notna().any()]


def estimator_state_figure(
    steps: pd.DataFrame, panels: Mapping[str, str], *, names: Mapping[str, str] | None = None
) -> plt.Figure:
    """Each logged column of `panels` (column -> panel title) over training, one panel each, for
    the runs that log it; dials shown by `label(dial, names)`."""
    theme()
    drawn = estimator_panels(steps, panels)
    if not drawn:
        fig, ax = plt.subplots(figsize=(5.0, 2.4))
        ax.text(0.5, 0.5, "no run logged an estimator's column", ha="center", va="center")
        ax.set_axis_off()
        fig.suptitle(f"Estimator state: none of {', '.join(panels) or 'no columns'} was logged")
        return fig
    colors = palette(steps["dial"].unique(), names)
    fig, axes = plt.subplots(1, len(drawn), figsize=(4.6 * len(drawn), 3.6), squeeze=False)
    notes = []
    for ax, column in zip(axes[0], drawn, strict=True):
        runs = steps[steps[column].notna()]
        smoothed = smooth_runs(runs, [column], SMOOTH)
        smoothed = shown(smoothed, names)
        sns.lineplot(data=smoothed, x="step", y=column, hue="dial", errorbar=("pi", 100), ax=ax,
                     palette=colors)  # fmt: skip
        ax.set(xlabel="training step", ylabel=column.replace("_", " "), title=panels[column])
        last = runs[runs["step"] > runs["step"].max() * 0.9].groupby("dial")[column].mean()
        notes += [f"{label(d, names)} {column.replace('_', ' ')} {v:.2f}" for d, v in last.items()]
    fig.suptitle("Estimator state in the last 10% of steps: " + "; ".join(notes), y=1.03)
    fig.tight_layout()
    return fig
