"""Tests for figures/simulate.py through the tables of a short controlled run."""

from __future__ import annotations

import numpy as np
from matplotlib import pyplot as plt

from grpo_dial.analysis.arms import SIMULATION_DEFAULT as ARMS
from grpo_dial.analysis.simulate.controlled import ARMS as ALL_ARMS
from grpo_dial.analysis.simulate.controlled import SimulationConfig, simulate
from grpo_dial.analysis.simulate.summary import summarize
from grpo_dial.figures import COLORS
from grpo_dial.figures.simulate import simulation_figure


def test_every_arm_has_a_colour_and_is_named_in_the_legend_and_title():
    assert all(arm in COLORS for arm in ALL_ARMS)
    names = {arm: f"<{arm}>" for arm in ARMS[:-1]}  # the last arm has no name: shown by its key
    shown = [names.get(arm, arm) for arm in ARMS]
    pool = np.random.default_rng(0).beta(0.7, 0.9, 500)
    steps, prompts = simulate(pool, SimulationConfig(n_prompts=80, steps=4))
    summary = summarize(steps, prompts)
    fig = simulation_figure(steps, prompts, summary, names=names)
    title = fig._suptitle.get_text()
    for arm, value in summary.set_index("arm")["hardest_quartile_final_p"].items():
        assert f"{names.get(arm, arm)} {value:.2f}" in title
    assert f"{ARMS[-1]} " in title and f"<{ARMS[-1]}>" not in title
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert legend == shown
    colours = [line.get_color() for line in fig.axes[0].get_legend().get_lines()]
    assert colours == [COLORS[arm] for arm in ARMS]  # the palette follows the display names
    plt.close(fig)
