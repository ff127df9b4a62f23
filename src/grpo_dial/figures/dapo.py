"""DAPO consistency figure: the logged all-correct fraction against the two fitted curves."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from grpo_dial.figures import theme

MODEL_LABELS = {
    "closed_form": "closed form E[p_T^32], one timescale",
    "saturating": "generic saturating curve, two parameters",
}
MODEL_COLORS = {"closed_form": "#c0504d", "saturating": "#7f7f7f"}


def dapo_figure(curve: pd.DataFrame, summary: pd.DataFrame) -> plt.Figure:
    """Observed fraction of prompts with avg@32 accuracy 1 (DAPO Fig. 3b) and both fits."""
    theme()
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    observed = curve.drop_duplicates("step").sort_values("step")
    ax.plot(
        observed["step"],
        observed["observed"],
        color="#1f4e79",
        lw=1.6,
        label="DAPO Fig. 3b (digitized)",
    )
    r2 = summary.set_index("model")["r2"]
    for model, rows in curve.groupby("model"):
        rows = rows.sort_values("step")
        ax.plot(
            rows["step"],
            rows["fitted"],
            color=MODEL_COLORS.get(model, "k"),
            lw=2,
            ls="-" if model == "closed_form" else "--",
            label=f"{MODEL_LABELS.get(model, model)} (R² = {r2.get(model, float('nan')):.3f})",
        )
        if rows["lo"].notna().any():
            ax.fill_between(
                rows["step"],
                rows["lo"],
                rows["hi"],
                color=MODEL_COLORS.get(model, "k"),
                alpha=0.18,
                lw=0,
            )
    ax.set(xlabel="training step", ylabel="fraction of prompts with accuracy 1", ylim=(0, None))
    ax.legend(frameon=False, fontsize=8, loc="lower right")
    title = "DAPO's all-correct fraction against the closed form E[p_T^32]"
    if {"closed_form", "saturating"} <= set(r2.index):
        fit = summary.set_index("model")
        one, two = fit.loc["closed_form"], fit.loc["saturating"]
        verdict = "matches" if one["r2_hi"] >= two["r2"] else "trails"
        title = (
            f"One timescale gives R² = {one['r2']:.3f} [{one['r2_lo']:.3f}, {one['r2_hi']:.3f}]: "
            f"it {verdict} a generic 2-parameter curve (R² = {two['r2']:.3f})"
        )
    fig.suptitle(title, fontsize=10)
    return fig
