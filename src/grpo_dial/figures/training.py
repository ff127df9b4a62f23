"""Figures of the RL runs, drawn from the per-run tables gathered with `dial` and `seed` columns.

Per-step curves are smoothed with a centred rolling mean (window in the caption) for legibility;
the tables keep the raw values.
"""

from __future__ import annotations

from collections.abc import Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from grpo_dial.figures import label, palette, shown, theme
from grpo_dial.figures.smoothing import smooth_runs

TERM_LABELS = {
    "mix": "mix (accuracy shift)",
    "within_correct": "within correct",
    "within_incorrect": "within incorrect",
}
TERM_COLORS = {"mix": "#7f7f7f", "within_correct": "#4f8f3a", "within_incorrect": "#c0504d"}
SMOOTH = 9  # steps in the rolling mean of per-step curves


def length_curves_figure(
    curves: pd.DataFrame, *, names: Mapping[str, str] | None = None
) -> plt.Figure:
    """Mean response length of correct and incorrect responses over training, one panel per dial
    (titled `label(dial, names)`); the band is the spread over seeds."""
    theme()
    data = shown(curves[curves["band"] == "all"], names)
    data = smooth_runs(data, ["mean_len_correct", "mean_len_incorrect"], SMOOTH)
    long = data.melt(
        id_vars=["dial", "seed", "step"],
        value_vars=["mean_len_correct", "mean_len_incorrect"],
        var_name="responses",
        value_name="length",
    )
    long["responses"] = long["responses"].map(
        {"mean_len_correct": "correct", "mean_len_incorrect": "incorrect"}
    )
    grid = sns.relplot(
        data=long, x="step", y="length", hue="responses", col="dial", kind="line",
        palette={"correct": "#4f8f3a", "incorrect": "#c0504d"}, errorbar=("pi", 100),
        height=3.2, aspect=1.0, facet_kws={"sharey": True},
    )  # fmt: skip
    grid.set_axis_labels("training step", "mean response length (characters)")
    grid.set_titles("{col_name}")
    first = long[long["step"] <= long["step"].min() + SMOOTH]
    last = long[long["step"] >= long["step"].max() - SMOOTH]
    growth = (
        last.groupby("responses")["length"].mean() - first.groupby("responses")["length"].mean()
    )
    grid.figure.suptitle(
        f"Incorrect responses grow by {growth.get('incorrect', np.nan):+.1f} characters on "
        f"average across dials, correct ones by {growth.get('correct', np.nan):+.1f}",
        y=1.04,
    )
    return grid.figure


ROW_INCHES = 0.3  # height of one run's bar row: room for an 8-point label with space around it


def decomposition_runs(terms: pd.DataFrame) -> pd.DataFrame:
    """(dial, seed) of every run, arms in the table's (the config's) order, seeds ascending."""
    runs = terms[["dial", "seed"]].drop_duplicates()
    order = {d: i for i, d in enumerate(runs["dial"].unique())}
    return runs.sort_values(["dial", "seed"], key=lambda c: c.map(order) if c.name == "dial"
                            else c).reset_index(drop=True)  # fmt: skip


def decomposition_labels(
    runs: pd.DataFrame, *, names: Mapping[str, str] | None = None
) -> list[str]:
    """One label per run, top to bottom: the arm's display name (`label(dial, names)`) and the
    seed."""
    return [f"{label(d, names)}, seed {s}" for d, s in zip(runs["dial"], runs["seed"], strict=True)]


def decomposition_figure(
    terms: pd.DataFrame, *, names: Mapping[str, str] | None = None
) -> plt.Figure:
    """The three-term split of the length change per run, stacked horizontally (positive right,
    negative left), with the total and its bootstrap interval; one row per run, so any number of
    arms and seeds keeps one readable label per row (`decomposition_labels`)."""
    theme()
    rows = terms[terms["kind"] == "term"]
    runs = decomposition_runs(rows)
    fig, ax = plt.subplots(
        figsize=(7.5, max(3.0, ROW_INCHES * len(runs) + 1.6)), layout="constrained"
    )
    y = np.arange(len(runs))
    pos, neg = np.zeros(len(runs)), np.zeros(len(runs))

    def value_of(quantity):
        return [rows[(rows["dial"] == d) & (rows["seed"] == s) & (rows["quantity"] == quantity)]
                .iloc[0] for d, s in zip(runs["dial"], runs["seed"], strict=True)]  # fmt: skip

    for term, color in TERM_COLORS.items():
        values = np.array([r["value"] for r in value_of(term)])
        left = np.where(values >= 0, pos, neg)
        ax.barh(y, values, left=left, color=color, label=TERM_LABELS[term], height=0.7)
        pos, neg = pos + np.clip(values, 0, None), neg + np.clip(values, None, 0)
    total = value_of("total")
    value = np.array([t["value"] for t in total])
    err = np.array([[t["value"] - t["lo"] for t in total], [t["hi"] - t["value"] for t in total]])
    ax.errorbar(value, y, xerr=err, fmt="D", color="black", ms=5, capsize=3, label="total (90% CI)")
    ax.axvline(0, color="black", lw=0.8)
    ax.set_yticks(y, decomposition_labels(runs, names=names), fontsize=8)
    ax.set_ylim(len(runs) - 0.5, -0.5)  # the first run on top
    ax.set_xlabel("change in mean length, last vs first window (characters)")
    fig.legend(frameon=False, fontsize=8, ncol=4, loc="outside lower center")
    fig.suptitle(decomposition_title(rows), fontsize=11)
    return fig


def decomposition_title(rows: pd.DataFrame) -> str:
    """The split's answer in its stable terms: the median over runs of the within-incorrect and
    within-correct changes (characters), and how many runs' 90% intervals lie above 0."""
    terms = {q: rows[rows["quantity"] == q] for q in ("within_incorrect", "within_correct")}
    wrong, right = terms["within_incorrect"], terms["within_correct"]
    return (
        f"Incorrect responses change by a median {wrong['value'].median():+.1f} characters "
        f"({int((wrong['lo'] > 0).sum())} of {len(wrong)} runs above 0), correct ones by "
        f"{right['value'].median():+.1f} ({int((right['lo'] > 0).sum())} of {len(right)})"
    )


def accuracy_length_figure(
    steps: pd.DataFrame, *, names: Mapping[str, str] | None = None
) -> plt.Figure:
    """Training accuracy against mean response length, a trajectory per run (smoothed); dials
    shown by `label(dial, names)`."""
    theme()
    colors = palette(steps["dial"].unique(), names)
    data = shown(smooth_runs(steps, ["accuracy", "mean_len"], SMOOTH), names)
    fig, ax = plt.subplots(figsize=(6.2, 4.4))
    sns.lineplot(data=data, x="mean_len", y="accuracy", hue="dial", units="seed",
                 estimator=None, sort=False, ax=ax, lw=1.4, palette=colors)  # fmt: skip
    ends = data.sort_values("step").groupby(["dial", "seed"]).tail(1)
    sns.scatterplot(data=ends, x="mean_len", y="accuracy", hue="dial", ax=ax, legend=False,
                    marker="o", s=40, palette=colors)  # fmt: skip
    ax.set(xlabel="mean response length (characters)", ylabel="training accuracy (sampled)")
    ax.legend(title=None, frameon=False, fontsize=8)
    corr = np.corrcoef(data["mean_len"], data["accuracy"])[0, 1]
    fig.suptitle(f"Accuracy against length over training (correlation {corr:+.2f}; dot = end)",
                 fontsize=11)  # fmt: skip
    return fig


def silent_figure(steps: pd.DataFrame, *, names: Mapping[str, str] | None = None) -> plt.Figure:
    """Silent fraction over training, split into all-correct and all-wrong groups, against the
    closed form E[p^G + (1-p)^G] from the base policy's pass rates of the same step's prompts;
    one panel per dial, titled `label(dial, names)`."""
    theme()
    data = shown(smooth_runs(
        steps, ["all_correct_fraction", "all_wrong_fraction", "expected_silent_base"], SMOOTH
    ), names)  # fmt: skip
    long = data.melt(
        id_vars=["dial", "seed", "step"],
        value_vars=["all_correct_fraction", "all_wrong_fraction", "expected_silent_base"],
        var_name="kind", value_name="fraction",
    )  # fmt: skip
    long["kind"] = long["kind"].map({
        "all_correct_fraction": "all correct (measured)",
        "all_wrong_fraction": "all wrong (measured)",
        "expected_silent_base": "silent, closed form at base pass rates",
    })  # fmt: skip
    grid = sns.relplot(
        data=long, x="step", y="fraction", hue="kind", col="dial", kind="line", height=3.2,
        palette=["#1f4e79", "#c0504d", "#7f7f7f"], errorbar=("pi", 100),
    )  # fmt: skip
    grid.set_axis_labels("training step", "fraction of groups")
    grid.set_titles("{col_name}")
    last = steps[steps["step"] > steps["step"].max() * 0.9]
    grid.figure.suptitle(
        f"Training turns groups unanimous: in the last 10% of steps "
        f"{last['all_correct_fraction'].mean():.0%} are all correct and "
        f"{last['all_wrong_fraction'].mean():.0%} all wrong "
        f"(closed form at the base pass rates: {last['expected_silent_base'].mean():.0%} silent)",
        y=1.04,
    )
    return grid.figure


def identity_figure(
    identity: pd.DataFrame, *, names: Mapping[str, str] | None = None
) -> plt.Figure:
    """The identity measured on the real model: sequence-level relative residual, and how far the
    dial's token-level aggregation moves the update (cosine to the sequence-level update); dials
    shown by `label(dial, names)`."""
    theme()
    if not identity.empty:
        identity = shown(identity, names)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.0))
    if identity.empty:  # every probed batch was silent: say so instead of drawing nothing
        for ax in axes:
            ax.text(0.5, 0.5, "no informative group was probed", ha="center", va="center")
            ax.set_axis_off()
        fig.suptitle("The identity could not be measured: every probed group was silent")
        return fig
    sns.stripplot(data=identity, x="dial", y="seq_relative_residual", ax=axes[0], size=4,
                  color="#1f4e79")  # fmt: skip
    axes[0].set(
        yscale="log",
        xlabel="",
        ylabel=r"$\|\frac{1}{G}\sum A_i s_i - \sigma^{2-\alpha}(s^+-s^-)\| / \|\cdot\|$",
    )
    axes[0].set_title("sequence level: the identity holds", fontsize=10)
    sns.stripplot(data=identity, x="dial", y="token_cosine", ax=axes[1], size=4,
                  color="#c0504d")  # fmt: skip
    axes[1].set(xlabel="", ylabel="cosine to the sequence-level update")
    axes[1].set_title("token level: what the aggregation changes", fontsize=10)
    for ax in axes:
        ax.tick_params(axis="x", rotation=20)
    worst = identity.groupby("dial")["token_cosine"].mean().idxmin()
    fig.suptitle(
        f"Identity residual at most {identity['seq_relative_residual'].max():.0e}; the token "
        f"aggregation moves the update most under {worst} "
        f"(mean cosine {identity.groupby('dial')['token_cosine'].mean().min():.3f})",
        fontsize=11,
    )
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    return fig
