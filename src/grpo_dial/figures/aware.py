"""The aware-tail runs: does each normalizer move the tail by the mode the policy can see?

Left: log mean tail per step by mode, "~" (estimate, mostly wrong; solid) and "=" (compute,
mostly right; dashed), mean over seeds per dial. Middle: each dial's drift of the contrast
log T_~ - log T_= (last window - first), seed mean with its 90 % interval. Right: the measured
contrast ratio to the reference dial (the contrast cancels the movement both tails share;
bootstrap 90 % interval) beside the closed form's ratio as it
stands (lr x gradient, "SGD") and normalized by each arm's gradient norm ("Adam"). Drawn from rule
aware_summary's tables only.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from grpo_dial.figures import label, theme


def aware_figure(
    steps: pd.DataFrame,
    drift: pd.DataFrame,
    reference: str = "grpo",
    *,
    names: Mapping[str, str] | None = None,
) -> plt.Figure:
    """steps: dial, seed, step, theta_estimate, theta_compute; drift: analysis/aware.drift_table.
    Dials are shown by `label(dial, names)`."""
    theme()
    show = partial(label, names=names)
    fig, (ax0, ax1, ax2) = plt.subplots(1, 3, figsize=(17, 4.2))
    dials = list(dict.fromkeys(drift["dial"]))
    colors = dict(zip(dials, plt.cm.tab10(np.linspace(0, 1, 10)), strict=False))
    curves = steps.groupby(["dial", "step"])[["theta_estimate", "theta_compute"]].mean()
    for d in dials:
        if d not in curves.index.get_level_values(0):
            continue
        c = curves.loc[d]
        ax0.plot(c.index, c["theta_estimate"], color=colors[d], label=show(d))
        ax0.plot(c.index, c["theta_compute"], color=colors[d], ls="--")
    ax0.set(xlabel="step", ylabel="log mean tail (solid ~, dashed =)")
    ax0.legend(fontsize=8)

    con = drift[drift["quantity"] == "contrast"].set_index("dial").reindex(dials)
    y = np.arange(len(dials))
    cerr = [(con["mean"] - con["lo"]).clip(lower=0), (con["hi"] - con["mean"]).clip(lower=0)]
    ax1.errorbar(con["mean"], y, xerr=cerr, fmt="o", color="black", capsize=3)
    ax1.axvline(0, color="grey", lw=0.8)
    ax1.set_yticks(y, [show(d) for d in dials])
    ax1.set(xlabel="drift of log T~ - log T= (90% over seeds)")

    ratio = con
    # a ratio of seed means can fall outside its bootstrap percentiles when GRPO's mean is near 0
    err = [
        (ratio["ratio"] - ratio["ratio_lo"]).clip(lower=0),
        (ratio["ratio_hi"] - ratio["ratio"]).clip(lower=0),
    ]
    ax2.errorbar(ratio["ratio"], y, xerr=err, fmt="o", color="black", capsize=3, label="measured")
    ax2.scatter(
        ratio["ratio_sgd"], y - 0.15, marker="s", color="#1f4e79", label="closed form (SGD)"
    )
    ax2.scatter(
        ratio["ratio_adam"], y + 0.15, marker="^", color="#c0504d", label="closed form / |g|"
    )
    ax2.axvline(0, color="grey", lw=0.8)
    ax2.axvline(1, color="grey", lw=0.8, ls=":")
    ax2.set_yticks(y, [show(d) for d in dials])
    ax2.set(xlabel=f"contrast drift / {show(reference)}'s (90% bootstrap over seeds)")
    ax2.legend(fontsize=8)
    top = np.nanmax(np.r_[ratio["ratio_hi"].to_numpy(dtype=float), 2.0])
    ax2.set_xlim(-1.5, min(float(top) + 0.5, 6.0))

    g = con.loc[reference] if reference in con.index else None
    head = (
        f"{show(reference)} moves the tail contrast by {g['mean']:+.2f} (90% {g['lo']:+.2f} to "
        f"{g['hi']:+.2f})"
        if g is not None and np.isfinite(g["mean"])
        else "no reference run"
    )
    fig.suptitle(f"Aware tail: {head}; the closed form predicts zero for the constant normalizer")
    fig.tight_layout()
    return fig


def decomposition_figure(
    table: pd.DataFrame, *, names: Mapping[str, str] | None = None
) -> plt.Figure:
    """table: analysis/aware.decomposition_table (dial, term, mean, lo, hi). One panel per term
    of the length change (characters, last - first window), dials as rows, 90 % over seeds;
    dials shown by `label(dial, names)`."""
    theme()
    show = partial(label, names=names)
    terms = ["total", "mix", "within_correct", "within_incorrect"]
    dials = list(dict.fromkeys(table["dial"]))
    fig, axes = plt.subplots(1, len(terms), figsize=(16, 0.45 * len(dials) + 1.8), sharey=True)
    y = np.arange(len(dials))
    for ax, term in zip(axes, terms, strict=True):
        t = table[table["term"] == term].set_index("dial").reindex(dials)
        ax.errorbar(t["mean"], y, xerr=[t["mean"] - t["lo"], t["hi"] - t["mean"]], fmt="o",
                    color="black", capsize=3)  # fmt: skip
        ax.axvline(0, color="grey", lw=0.8)
        ax.set(title=term.replace("_", " "), xlabel="characters")
    axes[0].set_yticks(y, [show(d) for d in dials])
    inc = table[table["term"] == "within_incorrect"].set_index("dial")
    head = ", ".join(f"{show(d)} {inc.loc[d, 'mean']:+.2f}" for d in dials[:3] if d in inc.index)
    fig.suptitle(f"Aware tail, length change split by correctness; within incorrect: {head}")
    fig.tight_layout()
    return fig
