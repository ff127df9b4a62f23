"""Figure of the length pressure of logged runs: per step by dial, and against inflation."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from grpo_dial.figures import label, palette, theme
from grpo_dial.figures.smoothing import smooth_runs

WINDOW = 9  # steps in the rolling mean of the per-step curves


def title(runs: pd.DataFrame, prediction: pd.DataFrame) -> str:
    """The finding in one sentence, from the per-run and prediction tables."""
    pred = prediction.iloc[0]
    col = pred.get("inflation", "wrong_length_change")
    by = runs.groupby("dial")[["pressure_wrong", col]].mean()
    pushed = by[by["pressure_wrong"] > 1e-12]
    flat = by[by["pressure_wrong"].abs() <= 1e-12]
    if pushed.empty or flat.empty:
        return f"Length pressure on wrong answers, {int(pred['n_runs'])} runs"
    verdict = (
        "predicts"
        if pred["inflation_gap"] > 0 and pred["spearman_rho"] > 0.5
        else ("does not predict")
    )
    return (
        f"Length pressure {verdict} inflation: 1/|o| arms push wrong answers "
        f"{pushed['pressure_wrong'].mean():.2f} tokens per unit advantage, constant and token "
        f"mean 0; wrong answers grow {pushed[col].mean():+.1f} with it, "
        f"{flat[col].mean():+.1f} without ({col}; Spearman rho "
        f"{pred['spearman_rho']:.2f} over {int(pred['n_runs'])} runs)"
    )


def length_pressure_figure(
    steps: pd.DataFrame,
    runs: pd.DataFrame,
    prediction: pd.DataFrame,
    *,
    names: Mapping[str, str] | None = None,
) -> plt.Figure:
    """Pressure on wrong answers per step (rolling mean over WINDOW steps, mean over seeds);
    net pressure (what a blind length policy feels); each run's mean pressure against its
    wrong-answer inflation (prediction's `inflation` column: the decomposition's within-incorrect
    term for own runs). Dials are shown by `label(dial, names)`."""
    theme()
    smooth = smooth_runs(steps, ["pressure_wrong", "pressure_net"], WINDOW)
    colors = palette(pd.concat([smooth["dial"], runs["dial"]]).unique(), names)
    show = partial(label, names=names)
    smooth = smooth.assign(dial=smooth["dial"].map(show))
    runs_l = runs.assign(dial=runs["dial"].map(show))
    fig, axes = plt.subplots(1, 3, figsize=(17, 4.4))
    for ax, col, what in (
        (axes[0], "pressure_wrong", "on wrong answers (> 0: pushed longer)"),
        (axes[1], "pressure_net", "net: what a correctness-blind length feels"),
    ):
        sns.lineplot(
            data=smooth,
            x="step",
            y=col,
            hue="dial",
            palette=colors,
            ax=ax,
            errorbar=None,
            legend=ax is axes[0],
        )
        ax.axhline(0, color="black", lw=0.6)
        ax.set(xlabel="step", ylabel="length pressure (tokens)", title=what)
    axes[0].legend(title=None, frameon=False, fontsize=8)
    inflation = (
        prediction["inflation"].iloc[0] if "inflation" in prediction else "wrong_length_change"
    )
    sns.scatterplot(
        data=runs_l,
        x="pressure_wrong",
        y=inflation,
        hue="dial",
        palette=colors,
        ax=axes[2],
        legend=False,
        s=50,
    )
    axes[2].axhline(0, color="black", lw=0.6)
    axes[2].axvline(0, color="black", lw=0.6)
    axes[2].set(
        xlabel="mean pressure on wrong answers (tokens)",
        ylabel=f"wrong-answer inflation ({inflation})",
        title="one point per run",
    )
    if np.isfinite(prediction["spearman_rho"].iloc[0]):
        axes[2].annotate(
            f"Spearman rho {prediction['spearman_rho'].iloc[0]:.2f}",
            (0.55, 0.06),
            xycoords="axes fraction",
        )
    fig.suptitle(title(runs, prediction), fontsize=11)
    fig.tight_layout()
    return fig
