"""Figure of the length-bias simulation: tails over steps, drift against the closed form.

Also the length pressure of logged runs (rules length_pressure*): per step by dial, and
against inflation.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from grpo_dial.figures import label, palette, theme
from grpo_dial.figures.smoothing import smooth_runs


def title(
    summary: pd.DataFrame, fit: pd.DataFrame, *, names: Mapping[str, str] | None = None
) -> str:
    """The finding in one sentence, from the summary and fit tables (arms named by `names`)."""
    s = summary.set_index(["arm", "awareness"])
    top = summary["awareness"].max()
    parts = []
    if ("grpo", top) in s.index:
        g = s.loc[("grpo", top)]
        parts.append(
            f"an aware tail (a = {top:g}) under GRPO: wrong tails {g['tail_wrong_start']:.1f} -> "
            f"{g['tail_wrong_end']:.1f}, correct {g['tail_correct_start']:.1f} -> "
            f"{g['tail_correct_end']:.1f} tokens"
        )
    if ("grpo", 0.0) in s.index:
        b = s.loc[("grpo", 0.0)]
        parts.append(f"blind: {b['tail_wrong_end']:.1f}")
    if ("nostd_sequence", top) in s.index:
        n = s.loc[("nostd_sequence", top)]
        parts.append(
            f"{label('nostd_sequence', names)} at {n['measured_ratio_to_grpo']:.2f}x GRPO's rate "
            f"(closed form {n['predicted_ratio_to_grpo']:.2f})"
        )
    r2 = fit.set_index("path")["r2"]
    head = "Only a tail that knows it is wrong drifts: " if parts else "Length drift: "
    return (
        head + "; ".join(parts) + f"; closed form R^2 {r2.get('wrong', np.nan):.2f} (wrong), "
        f"{r2.get('correct', np.nan):.2f} (correct); constant normalizers 0"
    )


def length_bias_figure(
    steps: pd.DataFrame,
    summary: pd.DataFrame,
    fit: pd.DataFrame,
    curve: pd.DataFrame,
    *,
    names: Mapping[str, str] | None = None,
) -> plt.Figure:
    """Typical wrong (solid) and correct (dashed) tail over steps at the highest awareness;
    measured against closed-form per-step drift; wrong-path drift against awareness (lines:
    closed form, points: simulation, 90 % intervals over seeds); each arm's drift over GRPO's.
    Arms are shown by `label(arm, names)`."""
    theme()
    colors = palette(pd.concat([steps["arm"], summary["arm"], curve["arm"]]).unique(), names)
    show = partial(label, names=names)
    steps = steps.assign(arm=steps["arm"].map(show))
    summary_l = summary.assign(arm=summary["arm"].map(show))
    curve = curve.assign(arm=curve["arm"].map(show))
    top = steps["awareness"].max()
    fig, axes = plt.subplots(1, 4, figsize=(21, 4.6))

    aware = steps[steps["awareness"] == top]
    for y, style in (("tail_wrong", "-"), ("tail_correct", "--")):
        sns.lineplot(
            data=aware,
            x="step",
            y=y,
            hue="arm",
            palette=colors,
            ax=axes[0],
            linestyle=style,
            errorbar=None,
            legend=style == "-",
        )
    axes[0].set(
        xlabel="step",
        ylabel="typical tail (tokens); dashed: correct",
        title=f"tail length, awareness {top:g}",
    )
    axes[0].legend(title=None, frameon=False, fontsize=8)

    by_step = steps.groupby(["arm", "awareness", "step"], as_index=False).mean(numeric_only=True)
    for path, marker in (("wrong", "o"), ("correct", "^")):
        axes[1].scatter(
            by_step[f"predicted_drift_{path}"],
            by_step[f"measured_drift_{path}"],
            s=8,
            alpha=0.5,
            marker=marker,
            label=path,
            c=by_step["arm"].map(colors),
        )
    lo = float(np.nanmin(by_step[["predicted_drift_wrong", "predicted_drift_correct"]].to_numpy()))
    hi = float(np.nanmax(by_step[["predicted_drift_wrong", "predicted_drift_correct"]].to_numpy()))
    axes[1].plot([lo, hi], [lo, hi], color="black", lw=0.8)
    axes[1].set(
        xlabel="closed-form drift per step",
        ylabel="measured (mean over prompts, seeds)",
        title="circles wrong, triangles correct; line y = x",
    )

    sns.lineplot(
        data=curve,
        x="awareness",
        y="predicted_drift_wrong",
        hue="arm",
        palette=colors,
        ax=axes[2],
        legend=False,
    )
    for _, row in summary_l.iterrows():
        color = colors[row["arm"]]
        err = np.array(
            [
                [row["measured_drift_wrong"] - row["measured_drift_wrong_lo"]],
                [row["measured_drift_wrong_hi"] - row["measured_drift_wrong"]],
            ]
        )
        axes[2].errorbar(
            row["awareness"],
            row["measured_drift_wrong"],
            yerr=None if np.isnan(err).any() else err,
            fmt="o",
            color=color,
        )
    axes[2].axhline(0, color="black", lw=0.6)
    axes[2].set(
        xlabel="awareness a (0 = blind)",
        ylabel="wrong-path drift per step",
        title="lines: closed form at the start; points: run mean",
    )

    ratio = summary_l[summary_l["awareness"] == top]
    x = np.arange(len(ratio))
    axes[3].bar(x, ratio["measured_ratio_to_grpo"], color=[colors[a] for a in ratio["arm"]])
    lo_hi = ratio[["measured_ratio_to_grpo_lo", "measured_ratio_to_grpo_hi"]].to_numpy()
    ok = ~np.isnan(lo_hi).any(axis=1)
    axes[3].vlines(x[ok], lo_hi[ok, 0], lo_hi[ok, 1], color="black")
    axes[3].scatter(x, ratio["predicted_ratio_to_grpo"], marker="_", s=400, color="black", zorder=3)
    axes[3].set_xticks(x, ratio["arm"], rotation=20, ha="right")
    axes[3].set(
        ylabel="wrong-path drift / GRPO's", title="bars: run (90 % over seeds); dash: closed form"
    )

    fig.suptitle(title(summary, fit, names=names), fontsize=11)
    fig.tight_layout()
    return fig


WINDOW = 9  # steps in the rolling mean of the per-step curves


def pressure_title(runs: pd.DataFrame, prediction: pd.DataFrame) -> str:
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
    fig.suptitle(pressure_title(runs, prediction), fontsize=11)
    fig.tight_layout()
    return fig
