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
             "n_seeds": 2, "min": 0.25, "max": 0.75, "ratio": 1.0, "ratio_sgd": 1.0,
             "ratio_snr": 1.0, "sign_p": 0.5, "wilcoxon_p": 0.5, "n_up": 0, "n_down": 0,
             "takeoff_p": np.nan, "truncation_last": 0.0},
        ]
    )  # fmt: skip
    header, line = summary_lines(drift)
    assert "90 % over seeds" in header
    assert "grpo: 2 seeds: +0.25, +0.75 (no interval below 3 seeds)" in line
    assert "-9" not in line


STATE = pd.DataFrame({"accuracy": [0.3], "awareness": [0.5], "tail_estimate": [4.0],
                      "tail_compute": [1.5], "core": [6.0]})  # fmt: skip


def test_predicted_step_reads_an_accuracy_above_one_as_one():
    from grpo_dial.analysis.aware import predicted_step
    from grpo_dial.core.dial import preset

    over = predicted_step(STATE.assign(accuracy=1.5), preset("grpo"), 8, 16)
    one = predicted_step(STATE.assign(accuracy=1.0), preset("grpo"), 8, 16)
    np.testing.assert_array_equal(over[0], one[0])
    np.testing.assert_array_equal(over[1], one[1])


def _responses() -> pd.DataFrame:
    """Two steps of one group of 4 (tests/analysis/test_aware.py's toy)."""
    rows = []
    for step, tails in ((0, (4, 2, 1, 3)), (1, (8, 2, 1, 3))):
        for (prefix, reward), t in zip(
            (("~12", 0), ("~13", 1), ("=13", 1), ("=14", 0)), tails, strict=True
        ):
            rows.append(
                dict(step=step, group=0, prompt_id="p", difficulty="o2d1", reward=float(reward),
                     redundant=t, work=3, length=3 + t, tokens=3 + t + 1, prefix=prefix,
                     truncated=False, resample_round=0)
            )  # fmt: skip
    return pd.DataFrame(rows)


@pytest.mark.parametrize("grad_norm", [[], [float("nan"), float("inf")]])
def test_run_drift_without_a_finite_grad_norm_and_with_a_text_column(grad_norm):
    from grpo_dial.analysis.aware import run_drift, step_table
    from grpo_dial.core.dial import preset

    steps = step_table(_responses()).assign(dial="grpo")
    train = pd.DataFrame({"grad_norm": pd.Series(grad_norm, dtype=float)})
    d = run_drift(steps, train, preset("grpo"), 4, 1, lr=0.1, grad_clip=1.0, fraction=0.5)
    assert np.isnan(d["grad_norm"]) and d["clip_share"] == 0.0
    assert d["d_tail_wrong_resp"] == pytest.approx(2.0)  # wrong tails (4+3)/2 -> (8+3)/2
