"""analysis.aware: details mutation testing found unpinned (docs/development.md#mutation-testing):
the tail's continue probability at its cap, the bootstrap's seed, the dials' order and the
seed count reaching the summary line."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from grpo_dial.analysis.aware import (
    DECOMPOSITION_TERMS,
    _boot_ratio,
    _q,
    decomposition_table,
    summary_lines,
)


def test_q_is_the_geometric_continue_probability_kept_inside_its_caps():
    got = _q(np.array([1.0, 3.0, 5000.0, 1e-6]))
    assert got == pytest.approx([0.5, 0.75, 1000 / 1001, 1e-3 / 1.001])


def test_boot_ratio_is_reproducible_from_its_seed():
    x, y = np.array([1.0, 2.0, 4.0, 3.0]), np.array([2.0, 1.0, 1.5, 2.5])
    first = _boot_ratio(x, y, n_boot=200, seed=7, level=0.9)
    assert first == _boot_ratio(x, y, n_boot=200, seed=7, level=0.9)
    assert first[0] == pytest.approx(2.5 / 1.75)
    assert first[1:] != _boot_ratio(x, y, n_boot=200, seed=8, level=0.9)[1:]


def test_decomposition_table_keeps_the_dials_in_their_order():
    per_run = pd.DataFrame(
        [{"dial": d, **{t: float(i) for i, t in enumerate(DECOMPOSITION_TERMS)}} for d in "ba"]
    )
    table = decomposition_table(per_run)
    assert list(table["dial"]) == ["b"] * 4 + ["a"] * 4
    assert list(table["n_seeds"]) == [1] * 8


def test_summary_line_shows_two_seeds_values_not_an_interval():
    drift = pd.DataFrame(
        [
            {"dial": "grpo", "quantity": "contrast", "mean": 0.5, "lo": -9.0, "hi": 9.0,
             "n_seeds": 2, "min": 0.25, "max": 0.75, "ratio": 1.0, "ratio_sgd": 1.0},
        ]
    )  # fmt: skip
    (line,) = summary_lines(drift)
    assert "grpo 2 seeds: +0.250, +0.750 (no interval below 3 seeds)" in line
    assert "-9" not in line
