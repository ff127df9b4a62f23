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
    row = summary.set_index("model").loc["closed_form"] if "closed_form" in r2 else None
    title = "DAPO's discarded all-correct mass follows the closed form"
    if row is not None:
        title += (
            f" with one timescale (R² = {row['r2']:.3f}, [{row['r2_lo']:.3f}, {row['r2_hi']:.3f}])"
        )
    fig.suptitle(title, fontsize=10)
    return fig
