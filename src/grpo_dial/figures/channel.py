"""The checking tail's channel: what the policy could see and whether its tail length uses it.

Panels, left to right, means over seeds per dial and step: the tail's characters of wrong (solid)
and correct (dashed) responses; the within-group AUC of tail length for wrongness (0.5 = a tail
blind to correctness); the within-group tail gap (wrong - correct, characters). Right: the text
channel of sampled responses, base policy against each dial's final policy (mean over seeds):
the share of wrong answers whose check disagrees (sensitivity), of correct ones (false alarm),
and how much more often a second check follows a disagreeing first one (continue gap).
Drawn from rule channel_summary's tables only.

Also each arm's tail drift against GRPO's (`length_drift_runs_figure`): per-seed drifts as dots,
the mean over seeds with its 90 % Student-t interval, and the predicted band for the arm =
predicted ratio x the reference's measured mean (a ratio band for a token mean).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from grpo_dial.figures import label, theme

BARS = ("sensitivity", "false_alarm", "continue_gap")


def channel_figure(
    channel: pd.DataFrame, awareness: pd.DataFrame, *, names: Mapping[str, str] | None = None
) -> plt.Figure:
    """channel: one row per policy (dial 'base' or a dial, seed); awareness: dial, seed, step,
    mean_tail_wrong, mean_tail_correct, auc_tail, gap. Dials are shown by `label(dial, names)`."""
    theme()
    show = partial(label, names=names)
    fig, all_axes = plt.subplots(1, 4, figsize=(18, 3.9))
    tails, axes = all_axes[0], all_axes[1:]
    cols = ["mean_tail_wrong", "mean_tail_correct", "auc_tail", "gap"]
    curves = awareness.groupby(["dial", "step"], sort=False)[cols].mean()
    for j, dial in enumerate(dict.fromkeys(awareness["dial"])):
        c, color = curves.loc[dial], f"C{j}"
        tails.plot(c.index, c["mean_tail_wrong"], color=color, lw=1.2, label=show(dial))
        tails.plot(c.index, c["mean_tail_correct"], color=color, lw=1.0, ls="--")
        axes[0].plot(c.index, c["auc_tail"], color=color, label=show(dial), lw=1.2)
        axes[1].plot(c.index, c["gap"], color=color, label=show(dial), lw=1.2)
    tails.set(xlabel="step", ylabel="tail characters,\nwrong (solid) / correct (dashed)")
    axes[0].axhline(0.5, color="0.3", lw=0.8, ls="--")
    axes[0].set(xlabel="step", ylabel="within-group AUC of tail length\nfor wrongness")
    axes[1].axhline(0, color="0.3", lw=0.8, ls="--")
    axes[1].set(xlabel="step", ylabel="within-group tail gap,\nwrong - correct (chars)")
    tails.legend(fontsize=7)
    policies = channel.groupby("dial", sort=False)[list(BARS)].mean()
    x = np.arange(len(policies))
    for j, col in enumerate(BARS):
        axes[2].bar(x + (j - 1) * 0.27, policies[col], width=0.27, label=col)
    axes[2].set_xticks(x, [show(d) for d in policies.index], rotation=30, ha="right")
    axes[2].axhline(0, color="0.3", lw=0.8)
    axes[2].set(ylabel="share")
    axes[2].legend(fontsize=7)
    base = channel[channel["dial"] == "base"].iloc[0]
    final = awareness[awareness["step"] == awareness["step"].max()]["auc_tail"].mean()
    fig.suptitle(
        f"Base policy: {base['sensitivity']:.0%} of wrong answers' checks disagree "
        f"(false alarm {base['false_alarm']:.0%}), a second check after a disagreement "
        f"{base['continue_gap']:+.0%}; tail-length AUC for wrongness {base['auc_tail']:.2f} at "
        f"the base, {final:.2f} at the last step",
        fontsize=10,
    )
    fig.tight_layout()
    return fig


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
