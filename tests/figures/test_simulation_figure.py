"""Tests for figures/simulation.py through the tables of a short controlled run."""

from __future__ import annotations

import numpy as np

from grpo_dial.analysis.simulate import ARMS, SimulationConfig, simulate
from grpo_dial.analysis.simulate_summary import summarize
from grpo_dial.figures import COLORS, label
from grpo_dial.figures.simulation import simulation_figure


def test_every_arm_has_a_colour_and_is_in_the_title():
    assert all(arm in COLORS for arm in ARMS)
    pool = np.random.default_rng(0).beta(0.7, 0.9, 500)
    steps, prompts = simulate(pool, SimulationConfig(n_prompts=80, steps=4))
    summary = summarize(steps, prompts)
    fig = simulation_figure(steps, prompts, summary)
    title = fig._suptitle.get_text()
    for arm, value in summary.set_index("arm")["hardest_quartile_final_p"].items():
        assert f"{label(arm)} {value:.2f}" in title
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert legend == [label(arm) for arm in ARMS]
