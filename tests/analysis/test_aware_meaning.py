"""What the aware-tail analysis (analysis/aware/runs.py) means, on tables whose answers are hand
numbers: an AWARE toy (the mode says something about correctness, so a sign flip shows), the
core / tail split of a truncated response, the prediction's mapping of each dial to the closed
form at awareness above 0, a run's windows, and the intervals and ratios of the drift table."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from grpo_dial.analysis.aware.runs import (
    predicted_step,
    run_decomposition,
    run_drift,
    step_table,
    window_tail,
)
from grpo_dial.analysis.aware.section import summary_lines
from grpo_dial.analysis.aware.seeds import QUANTITIES, decomposition_table, drift_table
from grpo_dial.core.dial import preset, read_arm
from grpo_dial.core.length_drift import tail_drift

# Student t quantiles with 2 degrees of freedom in closed form: t_p = (2p - 1) / sqrt(2p(1 - p))
T95_DF2 = 0.9 / np.sqrt(2 * 0.95 * 0.05)  # 2.919986
T75_DF2 = 0.5 / np.sqrt(2 * 0.75 * 0.25)  # 0.816497


def _aware_responses() -> pd.DataFrame:
    """One group of 7 first-round responses, cores of 3 characters (mode + 2 digits), and one
    refill-round response that must be left out. tokens = core + tail + EOS when finished; the
    truncated one has no EOS, so its 12 tokens are 3 core + 9 tail."""
    rows = [
        # prefix, reward, truncated, tokens   (tail)
        ("~12", 0, False, 10, 0),  # 6
        ("~17", 0, True, 12, 0),  # 9: truncated, no EOS
        ("~13", 1, False, 6, 0),  # 2
        ("=13", 1, False, 5, 0),  # 1
        ("=13", 1, False, 7, 0),  # 3
        ("=15", 0, False, 4, 0),  # 0
        ("=13", 1, False, 6, 0),  # 2
        ("~13", 1, False, 54, 1),  # a DAPO refill: not a first-round response
    ]
    return pd.DataFrame(
        [dict(step=0, group=0, prefix=p, reward=float(r), truncated=t, tokens=n, resample_round=k)
         for p, r, t, n, k in rows]
    )  # fmt: skip


def test_step_table_of_an_aware_group_by_hand():
    r = step_table(_aware_responses()).iloc[0]
    assert r["n"] == 7 and r["accuracy"] == pytest.approx(4 / 7)
    # wrong: ~ ~ =, so P(~ | wrong) = 2/3; correct: ~ = = =, P(~ | correct) = 1/4
    assert (r["pi_wrong"], r["pi_correct"]) == (pytest.approx(2 / 3), pytest.approx(1 / 4))
    assert r["awareness"] == pytest.approx(2 / 3 - 1 / 4)  # +5/12: wrong answers lean to "~"
    # the truncated response: core 3 (no EOS), tail 12 - 3 = 9
    assert r["core"] == pytest.approx((6 * 4 + 3) / 7)
    assert r["tail_estimate"] == pytest.approx((6 + 9 + 2) / 3)
    assert r["tail_compute"] == pytest.approx((1 + 3 + 0 + 2) / 4)
    assert (r["tail_wrong"], r["tail_correct"]) == (pytest.approx(5.0), pytest.approx(2.0))
    assert r["tail"] == pytest.approx(23 / 7)
    assert r["theta_estimate"] == pytest.approx(np.log(17 / 3))
    assert r["theta_compute"] == pytest.approx(np.log(1.5))
    assert r["truncation"] == pytest.approx(1 / 7)
    assert (r["n_estimate"], r["n_compute"]) == (3, 4)
    # (wrong, correct) pairs with the longer tail wrong: 6 and 9 beat all 4, 0 beats none
    assert r["auc_tail"] == pytest.approx(8 / 12)


# the state of one step: p 0.3, a 0.5, E[T | ~] 4 (q 0.8), E[T | =] 1.5 (q 0.6), core 6
STATE = pd.DataFrame({"accuracy": [0.3], "awareness": [0.5], "tail_estimate": [4.0],
                      "tail_compute": [1.5], "core": [6.0]})  # fmt: skip
G, M = 8, 16


@pytest.mark.parametrize(
    ("arm", "closed_form"),
    [
        # DAPO's token mean over the batch's M groups, silent groups redrawn up to 4 times
        ({"preset": "dapo", "std_ddof": 1, "eps": 0.01},
         {"length_norm": "token", "scope": "batch", "n_groups": M, "ddof": 1, "eps": 0.01,
          "silent": "drop", "max_resample_rounds": 4}),
        ({"preset": "dapo", "max_resample_rounds": 1},
         {"length_norm": "token", "scope": "batch", "n_groups": M, "eps": 1e-6,
          "silent": "drop", "max_resample_rounds": 1}),
        # lambda-GRPO starts at lambda 0: the token mean over the batch, silent groups kept
        ({"preset": "lambda_grpo"},
         {"length_norm": "token", "scope": "batch", "n_groups": M, "eps": 1e-6}),
        # the per-response mean at std power 1/2, sample std, dropped silent groups refilled
        ({"preset": "grpo", "std_power": 0.5, "std_ddof": 1, "eps": 0.01, "silent": "drop",
          "max_resample_rounds": 3},
         {"length_norm": "sequence", "std_power": 0.5, "ddof": 1, "eps": 0.01,
          "silent": "drop", "max_resample_rounds": 3}),
    ],
)  # fmt: skip
def test_the_prediction_at_awareness_above_0_is_the_dials_closed_form(arm, closed_form):
    uw, uc = predicted_step(STATE, read_arm(arm).dial, G, M)
    ref = tail_drift(0.3, 0.8, 0.6, 6.0, G, awareness=0.5, **closed_form)
    assert uw[0] == pytest.approx(float(ref.wrong), rel=1e-9)
    assert uc[0] == pytest.approx(float(ref.correct), rel=1e-9)
    assert uw[0] > 0 > uc[0]  # aware: wrong-mode tails pushed longer, right-mode ones shorter


def test_a_negative_awareness_or_an_empty_core_is_clipped_into_the_model():
    uw, uc = predicted_step(STATE.assign(awareness=-0.2), preset("grpo"), G, M)
    assert (uw[0], uc[0]) == (0.0, 0.0)  # the model's a >= 0: clipped to blind
    uw, _ = predicted_step(STATE.assign(core=0.0), preset("grpo"), G, M)
    ref = tail_drift(0.3, 0.8, 0.6, 1.0, G, awareness=0.5, eps=1e-6)  # a core of >= 1 token
    assert uw[0] == pytest.approx(float(ref.wrong), rel=1e-9)
    uw, _ = predicted_step(STATE.assign(tail_estimate=0.0), preset("grpo"), G, M)
    ref = tail_drift(0.3, 1e-3 / 1.001, 0.6, 6.0, G, awareness=0.5, eps=1e-6)  # E[T] >= 1e-3
    assert uw[0] == pytest.approx(float(ref.wrong), rel=1e-9)


def test_a_step_without_a_mode_is_left_out_of_the_window():
    window = pd.DataFrame({"n_estimate": [4, 0, 2], "tail_estimate": [3.0, np.nan, 6.0]})
    assert window_tail(window, "estimate") == pytest.approx((12 + 12) / 6)  # tokens, pooled
    assert np.isnan(window_tail(window.assign(n_estimate=0), "estimate"))
    r = step_table(_aware_responses().query("prefix.str[0] == '='")).iloc[0]  # no "~" at all
    assert r["n_estimate"] == 0 and np.isnan(r["tail_estimate"]) and np.isnan(r["theta_estimate"])
    assert r["awareness"] == 0.0  # P(~ | wrong) = P(~ | correct) = 0


def _steps() -> pd.DataFrame:
    """5 steps; fraction 0.35 rounds 1.75 to windows of 2 steps: (0, 1) and (3, 4)."""
    return pd.DataFrame(
        {
            "step": [0, 1, 2, 3, 4],
            "accuracy": [0.3, 0.5, 0.6, 0.7, 0.9],
            "awareness": [0.4, 0.6, 0.0, 0.2, 0.2],
            "tail_estimate": [3.0, 5.0, 4.0, 6.0, 8.0],
            "tail_compute": [2.0, 2.0, 1.0, 1.0, 3.0],
            "core": [5.0, 7.0, 6.0, 6.0, 6.0],
            "n_estimate": [4, 4, 4, 2, 6],
            "n_compute": [4, 4, 4, 6, 2],
            "n_wrong": [5, 4, 4, 3, 1],
            "n_correct": [3, 4, 4, 5, 7],
            "truncation": [0.0, 0.0, 0.1, 0.2, 0.0],
            "tail_wrong": [3.0, 4.0, 4.0, 6.0, 9.0],
            "tail_correct": [2.0, 2.0, 1.0, 1.0, 1.0],
            "auc_tail": [0.5, 0.6, 0.7, 0.8, 1.0],
        }
    )


def test_run_drift_by_hand():
    train = pd.DataFrame({"grad_norm": [0.5, 1.0, 4.0, np.nan]})
    d = run_drift(_steps(), train, preset("grpo"), G, 4, lr=0.1, grad_clip=1.0, fraction=0.35)
    # L = log(1 + T) of each window's pooled tail of a mode; no base: the first window
    t_e = ((3 * 4 + 5 * 4) / 8, (6 * 2 + 8 * 6) / 8)  # 4.0 -> 7.5 tokens
    t_c = ((2 * 4 + 2 * 4) / 8, (1 * 6 + 3 * 2) / 8)  # 2.0 -> 1.5 tokens
    d_wrong, d_correct = np.log(8.5 / 5.0), np.log(2.5 / 3.0)
    assert d["d_wrong"] == pytest.approx(d_wrong) and d["d_correct"] == pytest.approx(d_correct)
    assert d["contrast"] == pytest.approx(d_wrong - d_correct)
    assert d["d_common"] == pytest.approx((d_wrong + d_correct) / 2)
    assert d["d_wrong_tokens"] == pytest.approx(t_e[1] - t_e[0])
    assert d["contrast_tokens"] == pytest.approx(3.5 - (t_c[1] - t_c[0]))
    assert (d["truncation_first"], d["truncation_last"]) == (0.0, pytest.approx(0.1))
    assert d["takeoff"] == 1  # contrast log(1.7) - log(5 / 6) = 0.71 > 0.5
    # by correctness: each step's tail of wrong (correct) responses weighted by their count
    wrong = ((6 * 3 + 9 * 1) / 4, (3 * 5 + 4 * 4) / 9)
    correct = ((1 * 5 + 1 * 7) / 12, (2 * 3 + 2 * 4) / 7)
    assert d["d_tail_wrong_resp"] == pytest.approx(wrong[0] - wrong[1])
    assert d["d_tail_correct_resp"] == pytest.approx(correct[0] - correct[1])
    assert (d["auc_tail_first"], d["auc_tail_last"]) == (pytest.approx(0.55), pytest.approx(0.9))
    assert d["awareness"] == pytest.approx(0.28) and d["accuracy"] == pytest.approx(0.6)
    # the prediction: the closed form at the FIRST window's mean state (p 0.4, a 0.5,
    # E[T|~] 4 -> q 0.8, E[T|=] 2 -> q 2/3, core 6), times lr x the run's 5 steps
    u = tail_drift(0.4, 0.8, 2 / 3, 6.0, G, 1.0, "sequence", 0.5, eps=1e-6)
    assert d["u_wrong"] == pytest.approx(float(u.wrong), rel=1e-9)
    assert d["u_correct"] == pytest.approx(float(u.correct), rel=1e-9)
    assert d["pred_wrong"] == pytest.approx(0.1 * 5 * float(u.wrong), rel=1e-9)
    assert d["pred_correct"] == pytest.approx(0.1 * 5 * float(u.correct), rel=1e-9)
    # gradient norms: the NaN left out, median 1.0; only 4.0 exceeds the clip 1.0
    assert d["grad_norm"] == 1.0 and d["clip_share"] == pytest.approx(1 / 3)
    no_clip = run_drift(_steps(), train, preset("grpo"), G, 4, 0.1, None, 0.35)
    assert no_clip["clip_share"] == 0.0


# the columns drift_table reads beside the quantities: base tails, take-off, truncated share
EXTRA = {"tail_estimate_base": 3.0, "tail_compute_base": 1.0, "tail_wrong_base": 2.0,
         "tail_correct_base": 1.5, "takeoff": 1, "truncation_last": 0.02}  # fmt: skip


def _runs() -> pd.DataFrame:
    """The reference arm grpo (every quantity 4 in 3 seeds) and an arm dr (1, 2, 3)."""
    quantities = QUANTITIES
    grpo = {"u_wrong": 0.02, "u_correct": -0.02, "pred_wrong": 0.3, "pred_correct": -0.3, **EXTRA}
    dr = {"u_wrong": 0.01, "u_correct": -0.03, "pred_wrong": 0.15, "pred_correct": -0.45, **EXTRA}
    rows = []
    for k in range(3):
        rows.append(
            {"dial": "grpo", "seed": k, **dict.fromkeys(quantities, 4.0), **grpo, "grad_norm": 2.0,
             "clip_share": 0.0}
        )  # fmt: skip
        rows.append(
            {"dial": "dr", "seed": k, **dict.fromkeys(quantities, k + 1.0), **dr,
             "grad_norm": (0.5, 0.5, 4.0)[k], "clip_share": (0.0, 0.0, 1.0)[k]}
        )  # fmt: skip
    return pd.DataFrame(rows)


@pytest.mark.parametrize(("level", "t"), [(0.9, T95_DF2), (0.5, T75_DF2)])
def test_the_drift_interval_is_the_t_interval_at_the_level(level, t):
    table = drift_table(_runs(), level=level, n_boot=200).set_index(["dial", "quantity"])
    r = table.loc[("dr", "d_wrong")]
    half = t * 1.0 / np.sqrt(3)  # seeds 1, 2, 3: sd 1; level 0.9 -> the 5 % and 95 % quantiles
    assert (r["mean"], r["lo"], r["hi"]) == pytest.approx((2.0, 2.0 - half, 2.0 + half))
    assert (table.loc[("grpo", "d_wrong"), "lo"], table.loc[("grpo", "d_wrong"), "hi"]) == (4, 4)


def test_the_snr_ratio_divides_each_arms_snr_by_the_references():
    table = drift_table(_runs(), n_boot=200, snr={"grpo": 0.4, "dr": 0.1})
    table = table.set_index(["dial", "quantity"])
    w, c = table.loc[("dr", "d_wrong")], table.loc[("dr", "d_correct")]
    assert w["n_seeds"] == 3 and w["grad_norm"] == 0.5  # median of 0.5, 0.5, 4
    assert w["clip_share"] == pytest.approx(1 / 3)
    # SGD: E[u_arm] / E[u_ref]; Adam: the push's SNR over the reference's, 0.1 / 0.4
    assert w["ratio_sgd"] == pytest.approx(0.01 / 0.02)
    assert c["ratio_sgd"] == pytest.approx(0.03 / 0.02)  # d_correct: the correct path
    assert (w["ratio_snr"], w["snr"]) == (pytest.approx(0.25), 0.1)
    assert table.loc[("grpo", "contrast"), "ratio_snr"] == pytest.approx(1.0)
    no_snr = drift_table(_runs(), n_boot=200).set_index(["dial", "quantity"])
    assert np.isnan(no_snr.loc[("dr", "d_wrong"), "ratio_snr"])
    assert (w["pred_sgd"], c["pred_sgd"]) == (pytest.approx(0.15), pytest.approx(-0.45))
    assert w["ratio"] == pytest.approx(2.0 / 4.0)  # measured: seed means 2 over 4
    one_seed = drift_table(_runs().query("dial == 'grpo' or seed == 0"), n_boot=200)
    r = one_seed.set_index(["dial", "quantity"]).loc[("dr", "d_wrong")]
    assert np.isnan(r["ratio"]) and np.isnan(r["ratio_lo"])  # one seed: no ratio interval


@pytest.mark.parametrize(("level", "z"), [(0.9, 1.6448536), (0.5, 0.6744898)])
def test_the_ratio_interval_is_the_bootstraps_central_percentiles(level, z):
    # reference: every seed 1, so the ratio is the arm's bootstrap mean of 100 seeds 0..99,
    # nearly normal with mean 49.5 and sd sqrt((100^2 - 1) / 12) / 10
    quantities = QUANTITIES
    rest = {"u_wrong": 0.01, "u_correct": -0.01, "pred_wrong": 0.1, "pred_correct": -0.1,
            "grad_norm": 1.0, "clip_share": 0.0, **EXTRA}  # fmt: skip
    runs = pd.DataFrame(
        [{"dial": "grpo", "seed": k, **dict.fromkeys(quantities, 1.0), **rest} for k in range(4)]
        + [{"dial": "x", "seed": k, **dict.fromkeys(quantities, float(k)), **rest}
           for k in range(100)]
    )  # fmt: skip
    r = drift_table(runs, level=level, n_boot=20000).set_index(["dial", "quantity"])
    r = r.loc[("x", "d_wrong")]
    sd = np.sqrt((100**2 - 1) / 12) / 10
    assert r["ratio"] == pytest.approx(49.5)
    assert r["ratio_lo"] == pytest.approx(49.5 - z * sd, abs=0.25)
    assert r["ratio_hi"] == pytest.approx(49.5 + z * sd, abs=0.25)


def test_decomposition_interval_at_the_level():
    terms = pd.DataFrame(
        [{"dial": "a", "seed": k, "total": k + 1.0, "mix": 0.0, "within_correct": 0.0,
          "within_incorrect": k + 1.0} for k in range(3)]
    )  # fmt: skip
    t = decomposition_table(terms, level=0.5).set_index(["dial", "term"])
    half = T75_DF2 / np.sqrt(3)
    assert (t.loc[("a", "total"), "lo"], t.loc[("a", "total"), "hi"]) == pytest.approx(
        (2.0 - half, 2.0 + half)
    )


def test_run_decomposition_compares_the_last_window_with_the_first():
    # one correct response per step, lengths 10 .. 50: windows (0, 1) and (3, 4) at 0.35
    responses = pd.DataFrame(
        {"step": range(5), "prompt_id": "p", "difficulty": "o2d1", "reward": 1.0,
         "length": [10, 20, 30, 40, 50], "tokens": [5, 10, 15, 20, 25], "work": 4,
         "redundant": [6, 16, 26, 36, 46],
         "resample_round": 0}
    )  # fmt: skip
    terms = run_decomposition(responses, fraction=0.35)
    assert terms["total"] == pytest.approx(22.5 - 7.5)  # tokens, not characters
    assert terms["within_correct"] == pytest.approx(15.0) and terms["mix"] == 0.0


def test_summary_line_gives_the_measured_and_the_closed_form_ratio():
    drift = drift_table(_runs(), n_boot=200)
    line = summary_lines(drift)[2]
    half = T95_DF2 / np.sqrt(3)
    assert line.startswith(f"  - dr: +2.00 [{2 - half:+.2f}, {2 + half:+.2f}], tokens +2.0 [")
    assert "closed form / GRPO: SGD 0.50, SNR nan" in line
    assert "take-offs 3 / 0 of 3" in line and "truncated at most 2.0 % (last window)" in line
    runs = _runs().assign(u_wrong=lambda r: np.where(r["dial"] == "dr", 0.03, 0.02))
    line = summary_lines(drift_table(runs, n_boot=200))[2]
    assert "dr: +2.00" in line and "SGD 1.50" in line


def test_summary_line_of_the_bridge():
    bridge = pd.DataFrame(
        {"quantity": ["auc", "pressure_wrong"], "value": [0.62, 12.4], "lo": [0.55, 3.2],
         "hi": [0.71, 20.6]}
    )  # fmt: skip
    line = summary_lines(drift_table(_runs(), n_boot=200), bridge)[-1]
    assert "for being wrong 0.62 [0.55, 0.71]" in line
    assert "pushes wrong answers by +12 [+3, +21] characters" in line
