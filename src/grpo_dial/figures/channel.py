"""The checking tail's channel: what the policy could see and whether its tail length uses it.

Panels, left to right, means over seeds per dial and step: the tail's characters of wrong (solid)
and correct (dashed) responses; the within-group AUC of tail length for wrongness (0.5 = a tail
blind to correctness); the within-group tail gap (wrong - correct, characters). Right: the text
channel of sampled responses, base policy against each dial's final policy (mean over seeds):
the share of wrong answers whose check disagrees (sensitivity), of correct ones (false alarm),
and how much more often a second check follows a disagreeing first one (continue gap).
Drawn from rule channel_summary's tables only.
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
