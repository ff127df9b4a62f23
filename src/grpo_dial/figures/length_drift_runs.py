"""Tail drift of each arm against GRPO, the prediction drawn next to the measurement.

One panel per arm pair (reference, arm): per-seed drifts as dots, the mean over seeds with its
90 % Student-t interval, and the predicted band for the arm = predicted ratio x the reference's
measured mean (from the drift table; a ratio band for a token mean). Drawn from the tables of
rule channel_summary only.
"""

from __future__ import annotations

from collections.abc import Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from grpo_dial.figures import label, theme

QUANTITY_LABELS = {
    "gap_drift": "drift of the within-group tail gap\n(wrong - correct, chars)",
    "wrong_tail_drift": "drift of the wrong tails (chars)",
}


def _interval_text(row: pd.Series) -> str:
    return f"{row['mean']:+.2f} [{row['lo']:+.2f}, {row['hi']:+.2f}]"


def length_drift_runs_figure(
    drift: pd.DataFrame,
    runs: pd.DataFrame,
    reference: str = "grpo",
    quantity: str = "gap_drift",
    *,
    names: Mapping[str, str] | None = None,
) -> plt.Figure:
    """drift: channel_summary's per-dial table; runs: its per-run table (dial, seed, quantity).
    Dials are shown by `label(dial, names)`."""
    theme()
    table = drift[drift["quantity"] == quantity].set_index("dial")
    if reference not in table.index:
        raise ValueError(f"the drift table has no reference dial {reference!r}")
    arms = [d for d in table.index if d != reference]
    fig, axes = plt.subplots(1, max(len(arms), 1), figsize=(3.3 * max(len(arms), 1), 3.8),
                             squeeze=False, sharey=True)  # fmt: skip
    ref = table.loc[reference]
    for ax, arm in zip(axes[0], arms, strict=False):
        row = table.loc[arm]
        for x, dial in ((0, reference), (1, arm)):
            seeds = runs.loc[runs["dial"] == dial, quantity].to_numpy(dtype=float)
            ax.plot(np.full(len(seeds), x) + np.linspace(-0.08, 0.08, len(seeds)), seeds, "o",
                    color="0.6", ms=4, label="seeds" if x == 0 else None)  # fmt: skip
            r = table.loc[dial]
            ax.errorbar([x], [r["mean"]], yerr=[[r["mean"] - r["lo"]], [r["hi"] - r["mean"]]],
                        fmt="s", color="#1f4e79", capsize=4,
                        label="measured, 90% over seeds" if x == 0 else None)  # fmt: skip
        lo, hi = row["predicted_lo"], row["predicted_hi"]
        ax.fill_between([1.7, 2.3], [lo, lo], [hi, hi], color="#e69f00", alpha=0.5, lw=0)
        ax.plot([1.7, 2.3], [lo, lo], color="#e69f00", lw=2, label="predicted")
        ax.plot([1.7, 2.3], [hi, hi], color="#e69f00", lw=2)
        ax.axhline(0, color="0.3", lw=0.8)
        ax.set_xticks([0, 1, 2], [label(reference, names), label(arm, names), "predicted"])
        ratio = (f"{row['ratio_lo']:.2f}" if row["ratio_lo"] == row["ratio_hi"]
                 else f"{row['ratio_lo']:.2f}-{row['ratio_hi']:.2f}")  # fmt: skip
        measured = row["measured_ratio"]
        ax.set_title(
            f"{label(arm, names)}: ratio predicted {ratio},\nmeasured {measured:.2f}", fontsize=9
        )
    axes[0, 0].set_ylabel(QUANTITY_LABELS.get(quantity, quantity))
    axes[0, 0].legend(fontsize=7, loc="best")
    acts = ref["lo"] > 0
    fig.suptitle(
        f"{label(reference, names)}'s tail drift {_interval_text(ref)}: "
        + ("the length bias acts on the tail" if acts else "no drift beyond seed noise")
        + f" ({int(ref['n_seeds'])} seeds)",
        fontsize=10,
    )
    fig.tight_layout()
    return fig
