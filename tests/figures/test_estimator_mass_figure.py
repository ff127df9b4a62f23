"""The estimator-mass figure draws the table's curves at one G, names estimators by the table
handed in, and its title lists those whose ratio to Dr. GRPO is flat."""

from __future__ import annotations

import numpy as np
from matplotlib import pyplot as plt

from grpo_dial.analysis.theory.estimators import estimator_mass_table
from grpo_dial.figures.theory import estimator_mass_figure


def test_estimator_mass_figure_draws_the_table_at_g():
    table = estimator_mass_table([0.1, 0.3, 0.5, 0.7], [4, 8])
    fig = estimator_mass_figure(table, names={"rloo": "R-label"}, group_size=4)
    left, right = fig.axes[:2]
    legend = [t.get_text() for t in right.get_legend().get_texts()]
    assert "R-label" in legend and "dr_grpo" in legend and "rloo" not in legend
    grpo = table[(table["estimator"] == "grpo") & (table["G"] == 4)]
    np.testing.assert_allclose(left.lines[0].get_ydata(), grpo["mass"].to_numpy())
    title = fig._suptitle.get_text()
    assert title.startswith("G = 4: in expectation R-label, opo, batch_std")
    assert "grpo_passk" not in title.split("\n")[0]
    plt.close(fig)
    # a G the table lacks: its middle G
    fig = estimator_mass_figure(table, group_size=16)
    assert fig._suptitle.get_text().startswith("G = 8")
    plt.close(fig)
