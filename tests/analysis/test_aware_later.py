"""The later states' tables (analysis/aware/later.py): the drift the states predict and the
logit each state's probes predict, by hand; a state's two rows; the run's end against run_drift;
the replay check; the tail-shape table's later-state columns filled from the table."""

from __future__ import annotations

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
from grpo_dial.analysis.aware.runs import STEP_COLUMNS, run_drift


def _later(seeds=(0, 1)) -> pd.DataFrame:
    """One level, one arm, two modes, states 0, 20, 40 of runs with 53.5 updates at lr 2."""
    rows = []
    for seed in seeds:
        for k, probe, pred, tail, logit in ((0, 1e-3, 2e-3, 3.0, 1.0), (20, 5e-4, 1e-3, 3.5, 1.04),
                                            (40, -1e-3, 0.0, 4.0, 1.06)):  # fmt: skip
            for mode, sign in (("wrong", 1.0), ("correct", -1.0)):
                rows.append({c: 0.0 for c in LATER_COLUMNS} | {
                    "level": "a80", "a": 0.8, "dial": "grpo", "seed": seed, "step": k,
                    "mode": mode, "lr": 2.0, "updates": 53.5, "probe": sign * probe * (1 + seed),
                    "probe_step": sign * probe * (1 + seed) - 1e-3, "predicted": sign * pred,
                    "tail": tail, "logit_base": logit})  # fmt: skip
    return pd.DataFrame(rows).sample(frac=1.0, random_state=0)  # any order


def test_later_drift_by_hand():
    """Seed 0, wrong mode: 2 x (20 x 1e-3 x 3 + 20 x 5e-4 x 3.5 + 13.5 x -1e-3 x 4) = 0.082;
    seed 1 doubles the probe: 0.164; mean 0.123. Closed form 2 x (20 x 2e-3 x 3 + 20 x 1e-3
    x 3.5) = 0.38 in both seeds; the correct mode is the wrong's negative."""
    d = later_drift(_later())
    assert list(d.columns) == DRIFT_COLUMNS and len(d) == 2
    r = d.set_index("mode")
    assert r.loc["wrong", "later_probe"] == pytest.approx(0.123)
    assert r.loc["wrong", "later_closed_form"] == pytest.approx(0.38)
    # the whole step 1e-3 below the probe at every state: 2 x 1e-3 x (20 x 3 + 20 x 3.5 + 13.5 x 4)
    assert r.loc["wrong", "later_step"] == pytest.approx(0.123 - 0.368)
    assert r.loc["correct", "later_probe"] == pytest.approx(-0.123)
    assert r.loc["wrong", "n_seeds"] == 2
    assert later_drift(_later().iloc[:0]).columns.tolist() == DRIFT_COLUMNS


def test_later_drift_refuses_a_state_past_the_run_and_a_short_table():
    late = _later((0,)).assign(updates=40.0)
    with pytest.raises(ValueError, match=r"^a later state at step 40 is not before the 40 "
                                         r"updates behind the run's last window \(a80, grpo, "
                                         r"seed 0\)$"):  # fmt: skip
        later_drift(late)
    with pytest.raises(ValueError, match=r"lacks column\(s\) \['tail'\]"):
        later_drift(_later().drop(columns="tail"))


def test_logit_moves_by_hand():
    """Seed 0, wrong mode: the logit moved 0, 0.04, 0.06; the earlier probes predict 0,
    2 x 20 x 1e-3 = 0.04, 0.04 + 2 x 20 x 5e-4 = 0.06."""
    t = logit_moves(_later())
    w = t[(t["seed"] == 0) & (t["mode"] == "wrong")].sort_values("step")
    assert w["logit_moved"].to_numpy() == pytest.approx([0.0, 0.04, 0.06])
    assert w["probe_moved"].to_numpy() == pytest.approx([0.0, 0.04, 0.06])
    text = later_markdown(_later())
    row = next(x for x in text.splitlines() if x.startswith("| 0.8 | grpo | wrong | 20 |"))
    # seeds 0 and 1: probe (5e-4 + 1e-3) / 2 = 0.75e-3; predicted lr 20 (1e-3 + 2e-3) / 2
    assert row == ("| 0.8 | grpo | wrong | 20 | 2 | +0.750 | -0.250 | +1.000 | 3.50 | +0.040 | "
                   "+0.060 |")  # fmt: skip


def test_a_states_two_rows():
    batches = pd.DataFrame({"wrong": [1.0, 3.0, np.nan], "correct": [-1.0, -2.0, -6.0],
                            "wrong_step": [0.5, 1.5, np.nan], "correct_step": [0.0, 0.0, 3.0]})
    pred = {"u_wrong": 0.5, "u_correct": -0.4, "step_wrong": 0.02, "step_correct": -0.03}
    state = pd.Series({"tail_estimate": 3.2, "tail_compute": 2.9})
    kernel = {"k_ee": 1.0, "k_ec": 0.1, "k_cc": 2.0, "k_diff": 2.8}
    keys = {"level": "a60", "a": 0.6, "dial": "grpo", "seed": 3, "step": 20, "lr": 2.5,
            "updates": 53.5}  # fmt: skip
    rows = pd.DataFrame(state_rows(keys, batches, pred, state, kernel, {"wrong": 1.1, "correct":
                                   1.2}, {"wrong": 1.3, "correct": 1.4},
                                   {"wrong": 3.0, "correct": 3.5}))  # fmt: skip
    assert list(rows.columns) == LATER_COLUMNS
    w, c = rows.iloc[0], rows.iloc[1]
    assert (w["mode"], w["n_batches"], w["probe"]) == ("wrong", 2, 2.0)  # the NaN batch left out
    assert w["probe_se"] == pytest.approx(np.sqrt(2.0) / np.sqrt(2))
    assert c["probe"] == -3.0 and c["probe_se"] == pytest.approx(np.std([-1, -2, -6], ddof=1)
                                                                 / np.sqrt(3))  # fmt: skip
    assert (w["predicted"], w["u"], c["predicted"], c["u"]) == (0.02, 0.5, -0.03, -0.4)
    assert (w["probe_step"], c["probe_step"]) == (1.0, 1.0)
    no_step = state_rows(keys, batches[["wrong", "correct"]], pred, state, kernel, {"wrong": 1.1,
                         "correct": 1.2}, {"wrong": 1.3, "correct": 1.4},
                         {"wrong": 3.0, "correct": 3.5})  # fmt: skip
    assert np.isnan(no_step[0]["probe_step"])
    assert (w["tail"], c["tail"], w["logit_base"], c["logit"]) == (3.2, 2.9, 1.3, 1.2)
    assert w["run_after"] == pytest.approx(-0.2) and c["run_after"] == pytest.approx(0.6)
    assert (w["k_ec"], w["seed"], w["updates"]) == (0.1, 3, 53.5)


def _cell(n=10, seed=0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    t = pd.DataFrame({c: rng.uniform(0.1, 1.0, n) for c in STEP_COLUMNS})
    return t.assign(step=np.arange(1, n + 1), grad_norm=rng.uniform(0, 1, n),
                    n_estimate=rng.integers(1, 9, n), n_compute=rng.integers(1, 9, n),
                    tail_estimate=rng.uniform(1, 5, n), tail_compute=rng.uniform(1, 5, n))


def test_the_runs_end_is_run_drifts_last_window():
    from grpo_dial.core.dial import read_arm

    cell = _cell()
    n, last = run_end(cell.sample(frac=1.0, random_state=1), 0.2)
    drift = run_drift(cell[STEP_COLUMNS], cell[["grad_norm"]], read_arm({"preset": "grpo"}).dial,
                      8, 16, 1.0, None, 0.2, cell.head(1))  # fmt: skip
    assert n == 8.5  # steps 9 and 10 sample after 8 and 9 updates
    assert last["wrong"] == pytest.approx(drift["tail_estimate_last"])
    assert last["correct"] == pytest.approx(drift["tail_compute_last"])


def test_check_replay_passes_the_cells_own_rows_and_names_the_first_difference():
    cell = _cell()
    check_replay(cell.head(4), cell.assign(seed=0), "(x)")
    off = cell.head(4).copy()
    off.loc[2, "tail_compute"] += 1e-6
    line = r"^the replayed run \(sgd, a0, grpo, seed 0\) differs from its stored cell at step 3 "
    with pytest.raises(ValueError, match=line + r"\(tail_compute "):
        check_replay(off, cell, "(sgd, a0, grpo, seed 0)")
    with pytest.raises(ValueError, match="at step 4 "):  # a step the cell lacks
        check_replay(cell.head(4), cell.head(3), "(x)")


def test_the_tail_shape_table_carries_the_later_states_drift():
    """shape_table with the later table fills later_probe and later_closed_form of the probed
    (level, arm, mode) from later_drift, NaN elsewhere and without the table."""
    from grpo_dial.analysis.aware.grid import FROZEN
    from grpo_dial.analysis.aware.tail_shape import mode_tails, shape_markdown, shape_table
    from grpo_dial.core.dial import arm_fields, read_arm

    base = pd.DataFrame([{"core": 5.5, "tail_estimate": 3.0, "tail_compute": 3.0}])
    kernel = pd.DataFrame([{"k_ee": 0.06, "k_ec": 0.01, "k_cc": 0.07}])
    arms = {d: arm_fields(read_arm({"preset": "grpo"})) for d in ("grpo", "other")}
    runs = pd.DataFrame([{"optimizer": "sgd", "level": lev, "a": 0.8, "dial": d, "seed": s,
                          "pred_theta_wrong": 0.1, "d_wrong_tokens": 0.0,
                          "d_correct_tokens": 0.0}
                         for lev in ("a60", "a80") for d in arms for s in range(2)])  # fmt: skip
    paired = pd.DataFrame(columns=["optimizer", "level", "first", "second", "quantity", "mean",
                                   "lo", "hi"]).assign(second=FROZEN)  # fmt: skip
    resp = pd.DataFrame({"prefix": ["~1", "~1", "=1", "=1"], "redundant": [2, 4, 1, 5]})
    tails = mode_tails(resp, core=5.5)
    args = (runs, paired, tails, base, kernel, arms, {"group_size": 8, "prompts_per_step": 16},
            {"estimate_rate": 0.5}, 2.0)  # fmt: skip
    t = shape_table(*args, later=_later()).set_index(["level", "dial", "mode"])
    drift = later_drift(_later()).set_index("mode")
    assert t.loc[("a80", "grpo", "wrong"), "later_probe"] == pytest.approx(0.123)
    assert t.loc[("a80", "grpo", "wrong"), "later_step"] == pytest.approx(0.123 - 0.368)
    assert t.loc[("a80", "grpo", "correct"), "later_closed_form"] == pytest.approx(
        drift.loc["correct", "later_closed_form"])  # fmt: skip
    assert t.loc[[("a60", "grpo", "wrong"), ("a80", "other", "wrong")], "later_probe"].isna().all()
    assert shape_table(*args)["later_probe"].isna().all()
    text = shape_markdown(tails, t.reset_index())
    assert "| +0.12 | -0.25 | +0.38 |" in next(x for x in text.splitlines()
                                       if x.startswith("| 0.8 | grpo | wrong |"))  # fmt: skip
    assert next(x for x in text.splitlines() if x.startswith("| 0.8 | other | wrong |")).endswith(
        "| n/a | n/a | n/a |")  # fmt: skip
