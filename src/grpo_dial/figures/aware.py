"""The aware-tail runs: does each normalizer move the tail by the mode the policy can see?

`aware_figure`. Left: the mean tail in tokens per step by mode, "~" (estimate, mostly wrong;
solid) and "=" (compute, mostly right; dashed), mean over seeds per dial, the base policy at step
0 as a dot. Middle: each dial's drift of the contrast log(1 + T~) - log(1 + T=) from the base to
the last window, every seed as a point and the seed mean with its 90 % interval. Right: the
contrast as a share of the reference dial's, measured (bootstrap 90 % interval) beside the closed
form's SGD ratio and its signal-to-noise (Adam) ratio.

`dose_figure`: the dose-response sweep, one row per optimizer (SGD, AdamW) and one column per
quantity (mode contrast and wrong-mode drift, tokens): per level and arm the seed mean with its
90 % interval against the prediction (SGD: the closed form through the base's kernel, the line
y = x, and dashed the least-squares line with its intercept; AdamW: the push's signal-to-noise
ratio, the line the fitted slope); `control`'s mean as a horizontal line: the offset every cell
shares (each run is measured against one base sample).

Drawn from the rules' tables only.
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
    base: pd.DataFrame | None = None,
    reference: str = "grpo",
    *,
    names: Mapping[str, str] | None = None,
    runs: pd.DataFrame | None = None,
) -> plt.Figure:
    """steps: dial, seed, step, tail_estimate, tail_compute; drift:
    analysis/aware_seeds.drift_table; base: the base policy's step table (step 0); runs: per-seed
    rows (dial, contrast) drawn as points when given. Dials are shown by `label(dial, names)`."""
    theme()
    show = partial(label, names=names)
    fig, (ax0, ax1, ax2) = plt.subplots(1, 3, figsize=(17, 4.2))
    dials = list(dict.fromkeys(drift["dial"]))
    colors = dict(zip(dials, plt.cm.tab10(np.linspace(0, 1, 10)), strict=False))
    curves = steps.groupby(["dial", "step"])[["tail_estimate", "tail_compute"]].mean()
    for d in dials:
        if d not in curves.index.get_level_values(0):
            continue
        c = curves.loc[d]
        ax0.plot(c.index, c["tail_estimate"], color=colors[d], label=show(d))
        ax0.plot(c.index, c["tail_compute"], color=colors[d], ls="--")
    if base is not None and len(base):
        ax0.scatter([0, 0], [base["tail_estimate"].iloc[0], base["tail_compute"].iloc[0]],
                    color="black", zorder=3, label="base policy (step 0)")  # fmt: skip
    ax0.set_yscale("symlog", linthresh=1.0)
    ax0.set(xlabel="step", ylabel="mean tail, tokens (solid ~, dashed =)")
    ax0.legend(fontsize=8)

    con = drift[drift["quantity"] == "contrast"].set_index("dial").reindex(dials)
    y = np.arange(len(dials))
    if runs is not None and len(runs):
        for i, d in enumerate(dials):
            x = runs.loc[runs["dial"] == d, "contrast"].to_numpy(dtype=float)
            ax1.scatter(x, np.full(len(x), i + 0.2), s=10, color="grey", alpha=0.7)
    cerr = [(con["mean"] - con["lo"]).clip(lower=0), (con["hi"] - con["mean"]).clip(lower=0)]
    ax1.errorbar(con["mean"], y, xerr=cerr, fmt="o", color="black", capsize=3)
    ax1.axvline(0, color="grey", lw=0.8)
    ax1.set_yticks(y, [show(d) for d in dials])
    ax1.set(xlabel="drift of log(1 + T~) - log(1 + T=), base -> last (90% over seeds)")

    # a ratio of seed means can fall outside its bootstrap percentiles when GRPO's mean is near 0
    err = [
        (con["ratio"] - con["ratio_lo"]).clip(lower=0),
        (con["ratio_hi"] - con["ratio"]).clip(lower=0),
    ]
    ax2.errorbar(con["ratio"], y, xerr=err, fmt="o", color="black", capsize=3, label="measured")
    ax2.scatter(con["ratio_sgd"], y - 0.15, marker="s", color="#1f4e79",
                label="closed form (SGD)")  # fmt: skip
    ax2.scatter(con["ratio_snr"], y + 0.15, marker="^", color="#c0504d",
                label="signal-to-noise (Adam)")  # fmt: skip
    ax2.axvline(0, color="grey", lw=0.8)
    ax2.axvline(1, color="grey", lw=0.8, ls=":")
    ax2.set_yticks(y, [show(d) for d in dials])
    ax2.set(xlabel=f"contrast drift / {show(reference)}'s (90% bootstrap over seeds)")
    ax2.legend(fontsize=8)
    top = np.nanmax(np.r_[con["ratio_hi"].to_numpy(dtype=float), 2.0])
    ax2.set_xlim(-1.5, min(float(top) + 0.5, 6.0))

    g = con.loc[reference] if reference in con.index else None
    head = (
        f"{show(reference)} moves the tail contrast by {g['mean']:+.2f} (90% {g['lo']:+.2f} to "
        f"{g['hi']:+.2f}; {int(g['n_up'])} of {int(g['n_seeds'])} seeds took off)"
        if g is not None and np.isfinite(g["mean"])
        else "no reference run"
    )
    fig.suptitle(f"Aware tail: {head}; the closed form predicts zero for the constant normalizer")
    fig.tight_layout()
    return fig


def decomposition_figure(
    table: pd.DataFrame, *, names: Mapping[str, str] | None = None
) -> plt.Figure:
    """table: analysis/aware_seeds.decomposition_table (dial, term, mean, lo, hi). One panel per
    term of the length change (tokens, last window - base policy), dials as rows, 90 % over seeds;
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
        ax.set(title=term.replace("_", " "), xlabel="tokens")
    axes[0].set_yticks(y, [show(d) for d in dials])
    inc = table[table["term"] == "within_incorrect"].set_index("dial")
    head = ", ".join(f"{show(d)} {inc.loc[d, 'mean']:+.2f}" for d in dials[:3] if d in inc.index)
    fig.suptitle(f"Aware tail, length change split by correctness; within incorrect: {head}")
    fig.tight_layout()
    return fig


def dose_figure(
    dose: pd.DataFrame,
    fit: pd.DataFrame | None = None,
    *,
    names: Mapping[str, str] | None = None,
    control: str | None = None,
) -> plt.Figure:
    """dose: analysis/aware_sweep.dose_table; fit: its dose_fit; control: the dial of the
    tail-frozen control (analysis.aware.grid.FROZEN), drawn as a level. Module docstring."""
    theme()
    show = partial(label, names=names)
    quantities = [("contrast_tokens", "mode contrast, tokens"),
                  ("d_wrong_tokens", "wrong-mode drift, tokens")]  # fmt: skip
    optimizers = [o for o in ("sgd", "adamw") if o in set(dose["optimizer"])]
    fig, axes = plt.subplots(len(optimizers), 2, figsize=(12, 4.4 * len(optimizers)),
                             squeeze=False)  # fmt: skip
    dials = list(dict.fromkeys(dose["dial"]))
    colors = dict(zip(dials, plt.cm.tab10(np.linspace(0, 1, 10)), strict=False))
    fits = fit.set_index(["optimizer", "quantity"]) if fit is not None and len(fit) else None
    for row, opt in enumerate(optimizers):
        for col, (q, title) in enumerate(quantities):
            ax = axes[row, col]
            t = dose[(dose["optimizer"] == opt) & (dose["quantity"] == q)]
            xcol = "predicted" if opt == "sgd" else "snr"
            for d in dials:
                s = t[t["dial"] == d].sort_values("a")
                err = [(s["mean"] - s["lo"]).clip(lower=0), (s["hi"] - s["mean"]).clip(lower=0)]
                ax.errorbar(s[xcol], s["mean"], yerr=err, fmt="o-", color=colors[d], capsize=3,
                            label=show(d), lw=0.8)  # fmt: skip
                for _, r in s.iterrows():
                    ax.annotate(f"a={r['a']:.1f}", (r[xcol], r["mean"]), fontsize=6,
                                xytext=(3, 3), textcoords="offset points")  # fmt: skip
            x = t[xcol].to_numpy(dtype=float)
            span = np.linspace(min(np.nanmin(x), 0.0), max(np.nanmax(x), 0.0), 2) if len(x) else []
            slope, note, f = 1.0, "y = x", None
            if fits is not None and (opt, q) in fits.index:
                f = fits.loc[(opt, q)]
                note = f"slope {f['slope']:.3g}, R^2 {f['r2']:.2f}, Spearman {f['spearman']:.2f}"
                slope = 1.0 if opt == "sgd" else float(f["slope"])
            if len(span):
                ax.plot(span, slope * span, color="grey", lw=0.8, ls=":")
            if len(span) and opt == "sgd" and f is not None:
                line = f"line {f['slope_affine']:.2f} x {f['intercept']:+.3f}"
                ax.plot(span, f["intercept"] + f["slope_affine"] * span, color="grey", lw=0.8,
                        ls="--", label=line)  # fmt: skip
            offset = dose.loc[(dose["dial"] == control) & (dose["quantity"] == q), "mean"]
            if len(offset):  # no row matches when control is None
                ax.axhline(float(offset.iloc[0]), color="tab:purple", lw=0.8, ls="-.",
                           label=f"{show(control)} (the shared offset)")  # fmt: skip
            ax.axhline(0, color="grey", lw=0.6)
            xlabel = ("closed form through the kernel (SGD), tokens" if opt == "sgd"
                      else "signal-to-noise ratio of the push per batch")  # fmt: skip
            ax.set(xlabel=xlabel, ylabel=f"measured {title} (90% over seeds)",
                   title=f"{opt}: {title}\n{note}")  # fmt: skip
            ax.legend(fontsize=7)
    fig.suptitle("Aware tail across awareness: measured drift against the prediction")
    fig.tight_layout()
    return fig
