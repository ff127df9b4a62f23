"""Figures of the RL runs, checked through what their tables say: panels per dial, the length
change in the title, the stacked terms, and the empty identity table."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from matplotlib import pyplot as plt

from grpo_dial.core.arm_names import display_names
from grpo_dial.figures import training


def _curves(n_steps=30):
    steps = np.arange(1, n_steps + 1)
    rows = []
    for dial in ("grpo", "dr_grpo"):
        for seed in (0, 1):
            rows.append(pd.DataFrame({
                "dial": dial, "seed": seed, "step": steps, "band": "all",
                "mean_len_correct": 20.0, "mean_len_incorrect": 20.0 + steps,
            }))  # fmt: skip
    return pd.concat(rows, ignore_index=True)


def test_length_curves_one_panel_per_dial_and_growth_in_the_title():
    fig = training.length_curves_figure(_curves())
    titles = sorted(ax.get_title() for ax in fig.axes)
    assert titles == ["dr_grpo", "grpo"]
    text = fig.texts[0].get_text()
    assert "correct ones by +0.0" in text
    growth = float(text.split("grow by ")[1].split(" ")[0])
    assert growth > 15  # incorrect responses grow by one character per step
    plt.close(fig)


def test_decomposition_stacks_the_terms_of_each_run():
    rows = []
    for seed, (mix, good, bad) in enumerate([(1.0, -2.0, 5.0), (0.5, 1.0, 3.0)]):
        total = mix + good + bad
        for q, v in (("mix", mix), ("within_correct", good), ("within_incorrect", bad)):
            rows.append(("grpo", seed, "term", q, v, v / total, v - 1, v + 1))
        rows.append(("grpo", seed, "term", "total", total, 1.0, total - 1, total + 1))
    terms = pd.DataFrame(rows, columns=["dial", "seed", "kind", "quantity", "value", "share",
                                        "lo", "hi"])  # fmt: skip
    fig = training.decomposition_figure(terms, names={"grpo": "G-label"})
    ax = fig.axes[0]
    widths = sorted(round(p.get_width(), 6) for p in ax.patches)
    assert widths == sorted([1.0, -2.0, 5.0, 0.5, 1.0, 3.0])
    assert [t.get_text() for t in ax.get_yticklabels()] == ["G-label, seed 0", "G-label, seed 1"]
    # within incorrect 5 and 3 (lo 4 and 2), within correct -2 and 1 (lo -3 and 0): the title
    # states the absolute terms, not a share of a total that may hold 0
    assert fig.texts[0].get_text() == (
        "Incorrect responses change by a median +4.0 characters (2 of 2 runs above 0), correct "
        "ones by -0.5 (0 of 2)"
    )
    plt.close(fig)
    fig = training.decomposition_figure(terms)  # no names: the arm's key
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels == ["grpo, seed 0", "grpo, seed 1"]
    plt.close(fig)


def _full_config_terms():
    """One run per arm and seed of config/full.yaml over the embedded default (its dials are
    added to the default's), each with the three terms and a total."""
    root = Path(__file__).resolve().parents[2] / "config"
    default, full = (yaml.safe_load((root / n).read_text()) for n in ("config.yaml", "full.yaml"))
    dials = list(default["dials"]) + [d for d in full["dials"] if d not in default["dials"]]
    rows = []
    for dial in dials:
        for seed in full["train"]["seeds"]:
            for q, v in (("mix", -1.0), ("within_correct", 1.0), ("within_incorrect", 4.0)):
                rows.append((dial, seed, "term", q, v, v / 4.0, np.nan, np.nan))
            rows.append((dial, seed, "term", "total", 4.0, 1.0, 3.0, 5.0))
    terms = pd.DataFrame(rows, columns=["dial", "seed", "kind", "quantity", "value", "share",
                                        "lo", "hi"])  # fmt: skip
    return terms, dials, full["train"]["seeds"]


def test_decomposition_labels_stay_readable_with_every_arm_of_the_full_config():
    terms, dials, seeds = _full_config_terms()
    fig = training.decomposition_figure(terms, names=display_names())
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert len(labels) == len(dials) * len(seeds) == len(set(labels))  # one label per run
    assert labels[0] == "GRPO, seed 0" and labels[1] == f"GRPO, seed {seeds[1]}"
    for dial in dials:  # every arm of the full config has a name in the docs' words
        assert dial in display_names(), dial
        shown = display_names()[dial]
        assert sum(label.startswith(shown + ", seed") for label in labels) >= len(seeds)
    fig.canvas.draw()  # laid out as drawn: no label overlaps the next or leaves the figure
    boxes = [t.get_window_extent() for t in ax.get_yticklabels()]
    for upper, lower in zip(boxes, boxes[1:], strict=False):
        assert upper.y0 >= lower.y1, "tick labels overlap"
    assert min(b.x0 for b in boxes) >= 0
    plt.close(fig)


def test_identity_figure_says_when_nothing_was_probed():
    fig = training.identity_figure(pd.DataFrame(columns=["dial", "seq_relative_residual",
                                                         "token_cosine"]))  # fmt: skip
    assert "could not be measured" in fig.texts[-1].get_text() or any(
        "could not be measured" in t.get_text() for t in fig.texts
    )
    plt.close(fig)
