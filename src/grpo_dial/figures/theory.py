"""Closed-form figures: the identity g(k), fidelity against G, difficulty weights, silent rate."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from grpo_dial.figures import COLORS, label, palette, theme

MARKERS = ("o", "s", "^", "D", "v")


def _group_size_ticks(ax: plt.Axes, grid: pd.DataFrame) -> None:
    """Log-scaled G axis labelled with plain powers of two inside the grid's range."""
    ticks = [
        g
        for g in (2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
        if grid["G"].min() <= g <= grid["G"].max()
    ]
    ax.set_xticks(ticks, labels=[str(g) for g in ticks])
    ax.minorticks_off()


def identity_figure(curve: pd.DataFrame) -> plt.Figure:
    """g(k) = sqrt(k(G-k))/G (line) against Monte-Carlo per-group updates at several baselines."""
    theme()
    fig, ax = plt.subplots(figsize=(6.0, 4.0))
    closed = curve.drop_duplicates("k").sort_values("k")
    ax.plot(
        closed["k"],
        closed["sigma_closed_form"],
        color="#1f4e79",
        lw=2.2,
        label=r"closed form $\sqrt{k(G-k)}/G$",
    )
    for marker, (baseline, rows) in zip(MARKERS, curve.groupby("baseline"), strict=False):
        rows = rows[rows["n_groups_at_k"] > 0]
        ax.scatter(
            rows["k"],
            rows["mc_update"],
            marker=marker,
            s=46,
            facecolor="none",
            edgecolor="#333333",
            label=f"Monte Carlo, groups drawn at p = {baseline:g}",
        )
    group_size = int(curve["G"].iloc[0])
    ax.set(
        xlabel=f"correct responses k in a group of G = {group_size}",
        ylabel=r"per-group update $\frac{1}{G}\sum_i A_i s_i$ / $(s^+ - s^-)$",
        xticks=range(group_size + 1),
    )
    ax.legend(frameon=False, fontsize=8, loc="lower center")
    worst = float(np.nanmax(np.abs(curve["mc_update"] - curve["sigma_closed_form"])))
    fig.suptitle(
        f"GRPO's per-prompt step is the group's reward std, at every baseline "
        f"(largest gap {worst:.1e})",
        fontsize=10,
    )
    return fig


def fidelity_figure(grid: pd.DataFrame, pass_rates=(0.5, 0.3, 0.1, 0.05)) -> plt.Figure:
    """Fidelity phi(p, G) = E[sigma]/sqrt(p(1-p)) (solid) and 1 - 1/(8Gp(1-p)) (dashed)."""
    theme()
    fig, ax = plt.subplots(figsize=(6.0, 4.0))
    palette = sns.color_palette("viridis", len(pass_rates))
    for color, p in zip(palette, pass_rates, strict=True):
        rows = grid[np.isclose(grid["p"], p)].sort_values("G")
        if rows.empty:
            continue
        ax.plot(
            rows["G"], rows["fidelity"], color=color, lw=2, marker="o", ms=3, label=f"p = {p:g}"
        )
        expansion = rows[rows["fidelity_expansion"] > 0]
        ax.plot(expansion["G"], expansion["fidelity_expansion"], color=color, lw=1, ls="--")
    ax.axhline(0.9, color="grey", lw=0.8, ls=":")
    ax.set(
        xscale="log",
        xlabel="group size G",
        ylim=(0, 1.02),
        ylabel=r"fidelity $\varphi = E[\sigma] / \sqrt{p(1-p)}$",
    )
    ax.legend(title="pass rate (dashed: large-G expansion)", frameon=False, fontsize=8)
    _group_size_ticks(ax, grid)
    at8 = grid[grid["G"] == 8].set_index("p")["fidelity"]
    title = "Small groups under-weight hard prompts"
    if len(at8):
        hard = at8.iloc[(np.abs(at8.index - 0.05)).argmin()]
        mid = at8.iloc[(np.abs(at8.index - 0.5)).argmin()]
        title += f": at G = 8 fidelity is {mid:.2f} for p = 0.5 but {hard:.2f} for p = 0.05"
    fig.suptitle(title, fontsize=10)
    return fig


def difficulty_weight_figure(
    weights: pd.DataFrame, *, names: Mapping[str, str] | None = None
) -> plt.Figure:
    """Weight per unit of pass rate: GRPO 1/sqrt(p(1-p)) (a bathtub) against Dr. GRPO's flat 1;
    recipes shown by `label(recipe, names)`."""
    theme()
    fig, ax = plt.subplots(figsize=(6.0, 4.0))
    data = weights.assign(recipe=weights["recipe"].map(partial(label, names=names)))
    colors = palette(weights["recipe"].unique(), names)
    sns.lineplot(data=data, x="p", y="weight", hue="recipe", palette=colors, lw=2.2, ax=ax)
    ax.set(yscale="log", xlabel="pass rate p", ylabel="gradient weight per unit of p (log scale)")
    ax.set_yticks([1, 2, 5, 10, 20, 50], labels=["1", "2", "5", "10", "20", "50"])
    ax.set_ylim(0.8, float(weights["weight"].max()) * 1.1)
    ax.legend(title=None, frameon=False)
    grpo = weights[weights["recipe"] == "grpo"]
    edge = grpo.loc[grpo["p"].idxmin()]
    fig.suptitle(
        f"GRPO weighs a prompt at p = {edge['p']:.2f} {edge['weight'] / 2:.1f}x more "
        "than one at p = 0.5; Dr. GRPO weighs all prompts alike",
        fontsize=10,
    )
    return fig


def silent_rate_figure(grid: pd.DataFrame, pass_rates=(0.5, 0.3, 0.1, 0.05)) -> plt.Figure:
    """Silent-group rate p^G + (1-p)^G against G, with its all-correct / all-wrong split."""
    theme()
    fig, ax = plt.subplots(figsize=(6.0, 4.0))
    palette = sns.color_palette("rocket", len(pass_rates))
    for color, p in zip(palette, pass_rates, strict=True):
        rows = grid[np.isclose(grid["p"], p)].sort_values("G")
        ax.plot(
            rows["G"], rows["silent_rate"], color=color, lw=2, marker="o", ms=3, label=f"p = {p:g}"
        )
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="group size G",
        ylabel=r"silent-group rate $p^G + (1-p)^G$",
        ylim=(1e-4, 1.05),
    )
    ax.legend(frameon=False, fontsize=8)
    _group_size_ticks(ax, grid)
    rows = grid[(grid["G"] == 8)]
    hard = rows.iloc[(np.abs(rows["p"] - 0.05)).argmin()] if len(rows) else None
    title = "Hard prompts stay silent unless the group is large"
    if hard is not None:
        title += f": at p = 0.05, G = 8 gives no signal {hard['silent_rate']:.0%} of the time"
    fig.suptitle(title, fontsize=10)
    return fig


def estimator_mass_figure(
    mass: pd.DataFrame, *, names: Mapping[str, str] | None = None, group_size: int = 8
) -> plt.Figure:
    """Each estimator's expected gradient mass m(p) at one G (that of `group_size`, else the
    table's middle G) and its ratio to Dr. GRPO's: flat = Dr. GRPO's difficulty weighting."""
    theme()
    sizes = sorted(mass["G"].unique())
    g = group_size if group_size in sizes else sizes[len(sizes) // 2]
    rows = mass[mass["G"] == g]
    order = list(dict.fromkeys(rows["estimator"]))
    spare = iter(sns.color_palette("tab20", len(order)))
    colors = {label(e, names): COLORS.get(e) or next(spare) for e in order}
    data = rows.assign(estimator=rows["estimator"].map(partial(label, names=names)))
    fig, axes = plt.subplots(1, 2, figsize=(11.0, 4.2))
    for ax, column, ylabel in (
        (axes[0], "mass", "expected gradient mass m(p)"),
        (axes[1], "ratio_to_dr_grpo", "m(p) / Dr. GRPO's m(p) (log scale)"),
    ):
        sns.lineplot(data=data, x="p", y=column, hue="estimator", palette=colors, lw=1.8, ax=ax,
                     legend=ax is axes[1])  # fmt: skip
        ax.set(xlabel="pass rate p", ylabel=ylabel)
    axes[1].set(yscale="log", ylim=(0.05, float(rows["ratio_to_dr_grpo"].max()) * 1.5))
    axes[1].legend(
        title=None, frameon=False, fontsize=7, loc="center left", bbox_to_anchor=(1, 0.5)
    )
    ratio = rows.groupby("estimator")["ratio_to_dr_grpo"]
    flat = (ratio.max() / ratio.min() < 1 + 1e-9) & (ratio.min() > 0)
    same = ", ".join(label(e, names) for e in order if flat.get(e, False) and e != "dr_grpo")
    fig.suptitle(
        f"G = {g}: in expectation {same}\nweight difficulty as Dr. GRPO does (a flat ratio); "
        f"GRPO's ratio spans {ratio.min().get('grpo', np.nan):.2f}-"
        f"{ratio.max().get('grpo', np.nan):.2f}",
        fontsize=10,
    )
    fig.tight_layout()
    return fig
