"""The real-data length figure: a panel per source, difficulty levels in order, the spread of
wrong-minus-right in the title."""

from __future__ import annotations

import pandas as pd
from matplotlib import pyplot as plt

from grpo_dial.figures.real_lengths import real_lengths_figure


def test_panels_ticks_and_title_from_the_table():
    table = pd.DataFrame({
        "source": ["gsm8k", "gsm8k", "math_cot"], "difficulty": ["2", "1", "1"],
        "mean_len_correct": [100.0, 80.0, 50.0], "mean_len_incorrect": [90.0, 120.0, 70.0],
        "diff": [-10.0, 40.0, 20.0],
    })  # fmt: skip
    fig = real_lengths_figure(table)
    assert [ax.get_title() for ax in fig.axes] == ["gsm8k", "math_cot"]
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["1", "2"]
    heights = [p.get_height() for p in fig.axes[0].patches]
    assert heights == [80.0, 100.0, 120.0, 90.0]  # correct bars, then incorrect, by difficulty
    title = fig.texts[0].get_text()
    assert "gsm8k: wrong minus right -10 to +40" in title
    assert "math_cot: wrong minus right +20 to +20" in title
    plt.close(fig)
