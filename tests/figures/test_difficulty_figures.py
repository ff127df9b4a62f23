"""The difficulty and difficulty-weight figures name the two recipes by the table handed in
(their keys without one), drawn from the analysis tables of a small pass-rate table."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from matplotlib import pyplot as plt

from grpo_dial.analysis import difficulty as d
from grpo_dial.analysis.theory.tables import difficulty_weight_curve
from grpo_dial.figures.difficulty import difficulty_figure
from grpo_dial.figures.theory import difficulty_weight_figure

NAMES = {"grpo": "G-label"}  # dr_grpo unnamed: shown by its key


def _legend(ax) -> list[str]:
    return [t.get_text() for t in ax.get_legend().get_texts()]


@pytest.mark.parametrize(("names", "shown"), [(NAMES, "G-label"), (None, "grpo")])
def test_difficulty_figure_names_the_recipes(names, shown):
    k = np.array([0, 2, 5, 8, 8, 1])
    table = pd.DataFrame({"p_hat": k / 8, "n": 8, "k": k})
    mass = d.mass_shares(table, "toy")
    histogram = d.histogram(table, "toy", bins=4)
    silent = d.silent_fractions(table, "toy", group_sizes=(2, 8))
    fig = difficulty_figure(histogram, mass, silent, names=names)
    assert _legend(fig.axes[1]) == [shown, "dr_grpo"]
    grpo = mass[mass["band"].str.startswith("decile") & (mass["recipe"] == "grpo")]["share"]
    heights = [p.get_height() for p in fig.axes[1].patches[: len(grpo)]]  # first hue: grpo
    np.testing.assert_allclose(heights, grpo.to_numpy())
    plt.close(fig)


@pytest.mark.parametrize(("names", "shown"), [(NAMES, "G-label"), (None, "grpo")])
def test_difficulty_weight_figure_names_the_recipes(names, shown):
    fig = difficulty_weight_figure(difficulty_weight_curve([0.1, 0.5, 0.9]), names=names)
    assert _legend(fig.axes[0]) == [shown, "dr_grpo"]
    ax = fig.axes[0]
    colour = dict(
        zip(_legend(ax), [ln.get_color() for ln in ax.get_legend().get_lines()], strict=True)
    )
    curves = {ln.get_color(): ln.get_ydata() for ln in ax.get_lines() if len(ln.get_ydata())}
    np.testing.assert_allclose(curves[colour[shown]], 1 / np.sqrt([0.09, 0.25, 0.09]))
    np.testing.assert_allclose(curves[colour["dr_grpo"]], 1.0)
    plt.close(fig)
