"""The later states' tables (analysis/aware/later.py) at the edges the main tests leave open: a
one-step window, NaN and near-zero replay columns, the refusal's exact line, one-state runs and
runs without a base state, the output order of the drift table, and the markdown table's exact
text."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pandas as pd
import pytest

from grpo_dial.analysis.aware.later import (
    DRIFT_COLUMNS,
    LATER_COLUMNS,
    check_replay,
    later_drift,
    later_markdown,
    logit_moves,
    run_end,
    state_rows,
)
from grpo_dial.analysis.aware.runs import STEP_COLUMNS


def _cell(n=4) -> pd.DataFrame:
    """Steps 1..n with tails 1, 2, .., counts 1 each, every other column 0.5."""
    t = pd.DataFrame({c: np.full(n, 0.5) for c in STEP_COLUMNS})
    return t.assign(step=np.arange(1, n + 1), grad_norm=0.25, n_estimate=1, n_compute=1,
                    tail_estimate=np.arange(1.0, n + 1), tail_compute=10.0 * np.arange(1, n + 1))


def test_a_window_of_one_step_reads_only_the_last_step():
    """10 steps, fraction 0.1: the window is step 10 alone (tails 10 and 100), 9 updates."""
    n, last = run_end(_cell(10).iloc[::-1], 0.1)
    assert n == 9.0
    assert last == {"wrong": 10.0, "correct": 100.0}


def test_check_replay_passes_a_nan_both_sides_and_refuses_a_near_zero_difference():
    cell = _cell()
    cell.loc[1, "theta_estimate"] = np.nan  # step 2: NaN in the replay and the cell alike
    check_replay(cell.head(3), cell, "(x)")
    off = cell.head(3).copy()
    off.loc[0, "core"] = 0.0
    cell.loc[0, "core"] = 1e-9  # no absolute slack: 0 and 1e-9 differ
    line = ("the replayed run (sgd, a0, grpo, seed 0) differs from its stored cell at step 1 "
            "(core 0, stored 1e-09): not the code or config that trained the cell; rerun rule "
            "aware_sweep_cell")  # fmt: skip
    with pytest.raises(ValueError, match="^" + re.escape(line) + "$"):
        check_replay(off, cell, "(sgd, a0, grpo, seed 0)")


def _state_args(wrong, correct):
    batches = pd.DataFrame({"wrong": wrong, "correct": correct})
    return ({"level": "a60", "a": 0.6, "dial": "grpo", "seed": 3, "step": 20, "lr": 2.5,
             "updates": 53.5}, batches,
            {"u_wrong": 0.5, "u_correct": -0.4, "step_wrong": 0.02, "step_correct": -0.03},
            pd.Series({"tail_estimate": 3.2, "tail_compute": 2.9}),
            {"k_ee": 1.0, "k_ec": 0.1, "k_cc": 2.0, "k_diff": 2.8}, {"wrong": 1.1, "correct": 1.2},
            {"wrong": 1.3, "correct": 1.4}, {"wrong": 3.0, "correct": 3.5})  # fmt: skip


def test_a_state_with_one_or_no_finite_batch_gives_nan_quietly():
    """One finite batch: probe is it, probe_se NaN; none: both NaN; no numpy warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        w, c = state_rows(*_state_args([np.nan, 0.25], [np.nan, np.nan]))
    assert (w["n_batches"], w["probe"]) == (1, 0.25) and np.isnan(w["probe_se"])
    assert c["n_batches"] == 0 and np.isnan(c["probe"]) and np.isnan(c["probe_se"])


def _run(level, a, dial, seed, steps, probes, lr=2.0, updates=50.0, tail=3.0):
    return [{c: 0.0 for c in LATER_COLUMNS} | {
        "level": level, "a": a, "dial": dial, "seed": seed, "step": k, "mode": mode,
        "lr": lr, "updates": updates, "probe": p * sign, "probe_step": 2 * p * sign,
        "predicted": 3 * p * sign, "tail": tail, "logit_base": 1.0 + k / 100}
        for k, p in zip(steps, probes, strict=True)
        for mode, sign in (("wrong", 1.0), ("correct", -1.0))]  # fmt: skip


def test_a_run_probed_only_at_its_base():
    """One state (k = 0) stands for all 50 updates: later_probe = 2 x 50 x 1e-3 x 3 = 0.3; its
    logit moved 0 and the probes predict 0."""
    later = pd.DataFrame(_run("a60", 0.6, "grpo", 0, [0], [1e-3]))
    drift = later_drift(later)
    w = drift[drift["mode"] == "wrong"].iloc[0]
    assert (w["n_seeds"], w["later_probe"]) == (1, pytest.approx(0.3))
    assert w["later_step"] == pytest.approx(0.6) and w["later_closed_form"] == pytest.approx(0.9)
    moved = logit_moves(later)
    assert moved["logit_moved"].tolist() == [0.0, 0.0]
    assert moved["probe_moved"].tolist() == [0.0, 0.0]


def test_a_run_without_its_base_state_has_no_logit_moved():
    """States 10 and 20 only: no k = 0 logit to move from (NaN); the probes still predict
    lr x 10 x probe(10) = 2 x 10 x 1e-3 = 0.02 at state 20."""
    moved = logit_moves(pd.DataFrame(_run("a60", 0.6, "grpo", 0, [10, 20], [1e-3, 5e-4])))
    assert moved["logit_moved"].isna().all()
    wrong = moved[moved["mode"] == "wrong"]
    assert wrong["probe_moved"].tolist() == [0.0, pytest.approx(0.02)]


def test_the_drift_table_keeps_the_order_the_levels_and_arms_first_appear():
    rows = (_run("a80", 0.8, "grpo", 1, [0], [1e-3]) + _run("a20", 0.2, "dr", 0, [0], [1e-3])
            + _run("a20", 0.2, "dr", 1, [0], [2e-3]))  # fmt: skip
    drift = later_drift(pd.DataFrame(rows))
    assert list(drift.columns) == DRIFT_COLUMNS
    assert drift[["level", "dial", "mode", "n_seeds"]].values.tolist() == [
        ["a80", "grpo", "wrong", 1], ["a80", "grpo", "correct", 1],
        ["a20", "dr", "wrong", 2], ["a20", "dr", "correct", 2]]  # fmt: skip
    assert drift["later_probe"].tolist() == pytest.approx([0.3, -0.3, 0.45, -0.45])


HEAD = """## The later states (aware_sweep/later_probe.csv)

Each run replayed to step k (k = 0: the base), means over the seeds: the expected move of the \
mode's continue logit per update and unit lr (x 1e3) through the transformer to first order \
(probe) and by SGD's whole step (curvature included), and through the kernel of the state's own \
sample (closed form); the state's mean tail (tokens); the logit moved since the base on the base \
sample's positions, beside the move the earlier states' probes predict (lr x updates x probe).

| a | arm | mode | k | seeds | probe | whole step | closed form | tail | logit moved | predicted |
|---|---|---|---|---|---|---|---|---|---|---|
"""


def test_the_markdown_table_by_hand():
    """Rows by a, arm, mode (wrong first), k. Seeds 0 and 1 of (a 0.2, dr) probe 1e-3 and 2e-3 at
    k = 0: probe +1.500, whole step +3.000, closed form +4.500 (x 1e3); at k = 10 the logit moved
    0.1 and the probes predict 2 x 10 x 1.5e-3 = +0.030; the correct mode the negatives."""
    rows = (_run("a80", 0.8, "grpo", 0, [10, 0], [1e-3, 1e-3])
            + _run("a20", 0.2, "grpo", 0, [0], [4e-3], tail=2.5)
            + _run("a20", 0.2, "dr", 0, [0, 10], [1e-3, 0.0])
            + _run("a20", 0.2, "dr", 1, [10, 0], [0.0, 2e-3]))  # fmt: skip
    body = (
        "| 0.2 | dr | wrong | 0 | 2 | +1.500 | +3.000 | +4.500 | 3.00 | +0.000 | +0.000 |\n"
        "| 0.2 | dr | wrong | 10 | 2 | +0.000 | +0.000 | +0.000 | 3.00 | +0.100 | +0.030 |\n"
        "| 0.2 | dr | correct | 0 | 2 | -1.500 | -3.000 | -4.500 | 3.00 | +0.000 | +0.000 |\n"
        "| 0.2 | dr | correct | 10 | 2 | +0.000 | +0.000 | +0.000 | 3.00 | +0.100 | -0.030 |\n"
        "| 0.2 | grpo | wrong | 0 | 1 | +4.000 | +8.000 | +12.000 | 2.50 | +0.000 | +0.000 |\n"
        "| 0.2 | grpo | correct | 0 | 1 | -4.000 | -8.000 | -12.000 | 2.50 | +0.000 | +0.000 |\n"
        "| 0.8 | grpo | wrong | 0 | 1 | +1.000 | +2.000 | +3.000 | 3.00 | +0.000 | +0.000 |\n"
        "| 0.8 | grpo | wrong | 10 | 1 | +1.000 | +2.000 | +3.000 | 3.00 | +0.100 | +0.020 |\n"
        "| 0.8 | grpo | correct | 0 | 1 | -1.000 | -2.000 | -3.000 | 3.00 | +0.000 | +0.000 |\n"
        "| 0.8 | grpo | correct | 10 | 1 | -1.000 | -2.000 | -3.000 | 3.00 | +0.100 | -0.020 |\n"
    )
    assert later_markdown(pd.DataFrame(rows)) == HEAD + body
