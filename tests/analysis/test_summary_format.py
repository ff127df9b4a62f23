"""Tests for grpo_dial.analysis.markdown: a mean over seeds prints with its t interval from
3 seeds on, and as the seeds' own values, with the reason, below."""

from __future__ import annotations

import pandas as pd

from grpo_dial.analysis.markdown import interval, num, over_seeds, seed_cell, signed


def test_three_seeds_print_the_interval():
    assert over_seeds(2733.0, 2100.4, 3365.6, 3, 2400.0, 3066.0, num, digits=0) == (
        "2733 [2100, 3366]"
    )


def test_two_seeds_print_their_values_and_why():
    got = over_seeds(2733.0, float("nan"), float("nan"), 2, 2400.0, 3066.0, num, digits=0)
    assert got == "2 seeds: 2400, 3066 (no interval below 3 seeds)"
    got = over_seeds(-0.5, None, None, 2, -1.0, 0.0, signed, digits=1)
    assert got == "2 seeds: -1.0, +0.0 (no interval below 3 seeds)"


def test_one_seed_prints_its_value_and_why():
    got = over_seeds(0.25, None, None, 1, 0.25, 0.25)
    assert got == "1 seed: 0.250 (no interval below 3 seeds)"


def test_missing_mean_and_a_table_without_counts():
    assert over_seeds(None, 1.0, 2.0, 3) == "n/a"
    # a table written before the counts existed prints as it always did
    assert over_seeds(1.5, 1.0, 2.0, None) == interval(1.5, 1.0, 2.0) == "1.500 [1.000, 2.000]"


def test_seed_cell_reads_interval_columns_by_name():
    row = pd.Series({"diff_mean": 2.0, "diff_lo": None, "diff_hi": None, "diff_n": 2,
                     "diff_min": 1.0, "diff_max": 3.0})  # fmt: skip
    assert seed_cell(row, "diff", signed, mean="diff_mean", digits=0) == (
        "2 seeds: +1, +3 (no interval below 3 seeds)"
    )
