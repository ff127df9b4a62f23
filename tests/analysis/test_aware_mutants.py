"""analysis.aware.runs, aware_seeds and aware_summary: details mutation testing found unpinned
(docs/development.md#mutation-testing): the tail's continue probability at its cap, the
bootstrap's seed, the dials' order and the seed count reaching the summary line."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from grpo_dial.analysis.aware.runs import DECOMPOSITION_TERMS, _q
from grpo_dial.analysis.aware.section import summary_lines
from grpo_dial.analysis.aware.seeds import _boot_ratio, decomposition_table


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
    from grpo_dial.analysis.aware.runs import predicted_step
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
    from grpo_dial.analysis.aware.runs import run_drift, step_table
    from grpo_dial.core.dial import preset

    steps = step_table(_responses()).assign(dial="grpo")
    train = pd.DataFrame({"grad_norm": pd.Series(grad_norm, dtype=float)})
    d = run_drift(steps, train, preset("grpo"), 4, 1, lr=0.1, grad_clip=1.0, fraction=0.5)
    assert np.isnan(d["grad_norm"]) and d["clip_share"] == 0.0
    assert d["d_tail_wrong_resp"] == pytest.approx(2.0)  # wrong tails (4+3)/2 -> (8+3)/2


# --------------------------------------------------------------------------- second round


def test_step_table_theta_is_nan_without_a_tail_and_log_below_one_token():
    from grpo_dial.analysis.aware.runs import STEP_COLUMNS, step_table

    r = _responses().query("step == 0")  # prefixes ~12 ~13 =13 =14, core 3 + EOS = 4 tokens
    r = r.assign(tokens=[4, 5, 5, 7])  # tails 0 1 1 3: "~" mean 0.5 (theta below 0), "=" 2
    row = step_table(r).iloc[0]
    assert row["theta_estimate"] == pytest.approx(np.log(0.5))
    zero = step_table(r.assign(tokens=[4, 4, 6, 8])).iloc[0]  # both "~" tails 0
    assert np.isnan(zero["theta_estimate"]) and zero["theta_compute"] == pytest.approx(np.log(3))
    empty = step_table(r.iloc[:0])
    assert list(empty.columns) == STEP_COLUMNS and len(empty) == 0


def test_predicted_step_leaves_a_stateless_step_nan():
    from grpo_dial.analysis.aware.runs import predicted_step
    from grpo_dial.core.dial import preset

    uw, uc = predicted_step(pd.concat([STATE, STATE.assign(tail_compute=np.nan)]),
                            preset("grpo"), 8, 16)  # fmt: skip
    assert uw.dtype == float and uc.dtype == float
    assert np.isfinite(uw[0]) and np.isnan(uw[1]) and np.isnan(uc[1])


def test_run_drift_takeoff_needs_a_contrast_past_the_threshold_and_no_train_table():
    from grpo_dial.analysis.aware.runs import TAKEOFF, run_drift, step_table
    from grpo_dial.core.dial import preset

    steps = step_table(_responses())
    d = run_drift(steps, pd.DataFrame(), preset("grpo"), 4, 1, 0.1, 1.0, fraction=0.5)
    # "~" tails (4 + 2) / 2 = 3 -> (8 + 2) / 2 = 5: log(6 / 4) = 0.405 < TAKEOFF, "=" unchanged
    assert d["contrast"] == pytest.approx(np.log(1.5)) and d["contrast"] < TAKEOFF
    assert d["takeoff"] == 0 and np.isnan(d["grad_norm"])


def test_rank_tests_without_a_nonzero_value_give_nan_p():
    from grpo_dial.analysis.aware.seeds import rank_tests

    out = rank_tests([0.0, 0.0, np.nan])
    assert set(out) == {"n_pos", "n_neg", "sign_p", "wilcoxon_p"}
    assert (out["n_pos"], out["n_neg"]) == (0, 0) and np.isnan(out["wilcoxon_p"])


def test_mann_whitney_of_identical_values_is_nan():
    from grpo_dial.analysis.aware.seeds import mann_whitney_p

    assert np.isnan(mann_whitney_p([1.0, 1.0], [1.0, 1.0]))
    assert mann_whitney_p([1.0, 2.0], [3.0, 4.0]) == pytest.approx(1 / 3)  # exact, two-sided


def test_boot_ratio_from_two_seeds_each():
    got = _boot_ratio(np.array([1.0, 3.0]), np.array([1.0, 1.0]), n_boot=50, seed=0, level=0.9)
    assert got[0] == pytest.approx(2.0) and 1.0 <= got[1] <= got[2] <= 3.0


def _drift_runs(u_ref: float = 0.02) -> pd.DataFrame:
    from grpo_dial.analysis.aware.seeds import QUANTITIES

    extra = {"tail_estimate_base": 3.0, "tail_compute_base": 1.0, "tail_wrong_base": 2.0,
             "tail_correct_base": 1.5, "truncation_last": 0.0, "grad_norm": 1.0,
             "clip_share": 0.0, "pred_wrong": 0.1, "pred_correct": -0.1}  # fmt: skip
    rows = [
        {"dial": d, "seed": k, **dict.fromkeys(QUANTITIES, float(k + (d == "grpo"))),
         "u_wrong": u_ref if d == "grpo" else 0.01, "u_correct": -0.01,
         "takeoff": int(k == 2 and d == "grpo"), **extra}
        for d in ("grpo", "dr_grpo") for k in range(3)
    ]  # fmt: skip
    return pd.DataFrame(rows)


def test_drift_table_min_max_seeded_ratio_and_a_zero_reference():
    from grpo_dial.analysis.aware.seeds import drift_table

    t = drift_table(_drift_runs(), n_boot=100)
    again = drift_table(_drift_runs(), n_boot=100)
    pd.testing.assert_frame_equal(t, again)  # the bootstrap's seed is fixed
    r = t.set_index(["dial", "quantity"]).loc[("dr_grpo", "d_wrong")]
    assert (r["min"], r["max"]) == (0.0, 2.0)
    assert t["snr"].dtype == float and t["snr"].isna().all()
    zero = drift_table(_drift_runs(u_ref=0.0), n_boot=50).set_index(["dial", "quantity"])
    assert np.isnan(zero.loc[("dr_grpo", "d_wrong"), "ratio_sgd"])


def test_truncation_table_keeps_the_runs_order():
    from grpo_dial.analysis.aware.seeds import truncation_table

    runs = pd.DataFrame(
        {
            "dial": ["b", "a"],
            "truncation_base": [0.0, 0.1],
            "truncation_first": [0.0, 0.2],
            "truncation_last": [0.3, 0.4],
        }
    )
    t = truncation_table(runs)
    assert list(t["dial"]) == ["b"] * 3 + ["a"] * 3
    assert t.iloc[2]["max"] == pytest.approx(0.3)


def test_run_decomposition_default_window_is_a_fifth_of_the_steps():
    from grpo_dial.analysis.aware.runs import run_decomposition

    responses = pd.DataFrame(
        {"step": range(10), "prompt_id": "p", "difficulty": "o2d1", "reward": 1.0,
         "tokens": [10.0 * (k + 1) for k in range(10)], "work": 4, "redundant": 1,
         "length": 1, "resample_round": 0}
    )  # fmt: skip
    terms = run_decomposition(responses)  # windows (0, 1) and (8, 9)
    assert terms["total"] == pytest.approx(95.0 - 15.0)


def test_decomposition_table_of_no_runs_keeps_its_columns():
    empty = pd.DataFrame(columns=["dial", *DECOMPOSITION_TERMS])
    assert list(decomposition_table(empty).columns) == ["dial", "term", "mean", "lo", "hi",
                                                         "n_seeds"]  # fmt: skip


def test_summary_lines_fisher_p_no_tokens_and_the_bridges_informative_problems():
    drift = pd.DataFrame(
        [{"dial": "grpo", "quantity": "contrast", "mean": 0.5, "lo": 0.1, "hi": 0.9,
          "n_seeds": 3, "min": 0.2, "max": 0.8, "ratio_sgd": 1.0, "ratio_snr": 1.0,
          "sign_p": 0.25, "wilcoxon_p": 0.25, "n_up": 2, "n_down": 0, "takeoff_p": 0.03,
          "truncation_last": 0.0}]
    )  # fmt: skip
    bridge = pd.DataFrame(
        {"quantity": ["auc", "pressure_wrong"] * 2, "value": [0.68, 51.4, 0.46, 16.0],
         "lo": [0.52, 15.1, 0.44, 9.7], "hi": [0.83, 96.4, 0.49, 24.8],
         "n_problems": [100, 100, 1319, 1319], "n_informative": [10, 10, 731, 731],
         "source": ["math_cot_100", "math_cot_100", "gsm8k", "gsm8k"]}
    )  # fmt: skip
    lines = summary_lines(drift, bridge)
    assert "  - grpo: +0.50 [+0.10, +0.90]; sign p 0.25" in lines[1]  # no tokens row: nothing
    assert "(Fisher p 0.03)" in lines[1]
    assert "Real samples (math_cot_100)" in lines[2] and "Real samples (gsm8k)" in lines[3]
    assert "0.68 [0.52, 0.83] (10 informative problems of 100)" in lines[2]
    assert "(731 informative problems of 1319)" in lines[3]
