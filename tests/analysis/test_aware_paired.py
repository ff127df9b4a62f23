"""The aware sweep's seed-paired comparisons and ratios (analysis/aware/paired.py) by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from grpo_dial.analysis.aware.grid import FROZEN
from grpo_dial.analysis.aware.paired import paired_table, ratio_table, seed_ratio


def _runs(grpo, dr, ctrl, optimizer="sgd") -> pd.DataFrame:
    """One level (a = 0.6) of three arms; contrast_tokens as given per seed, the modes' drifts
    half of it each way; GRPO's prediction 1.0, Dr. GRPO's 0; the control's seeds 0..n-1."""
    rows = []
    for dial, values, pred in (("grpo", grpo, 1.0), ("dr_grpo", dr, 0.0), (FROZEN, ctrl, 0.0)):
        for seed, v in enumerate(values):
            if v is None:
                continue
            rows.append({"optimizer": optimizer, "level": "a60", "a": 0.6, "dial": dial,
                         "seed": seed, "contrast_tokens": v, "d_wrong_tokens": v / 2,
                         "d_correct_tokens": -v / 2, "pred_contrast_tokens": pred,
                         "pred_d_wrong_tokens": pred / 2,
                         "pred_d_correct_tokens": -pred / 2})  # fmt: skip
    return pd.DataFrame(rows)


def test_paired_differences_read_seed_by_seed():
    grpo, dr = [1.0, 2.0, 0.5, 1.5, 3.0], [0.2, 0.1, 0.0, -0.1, 0.3]
    ctrl = [0.1, 0.0, 0.2, 0.1, None]
    t = paired_table(_runs(grpo, dr, ctrl), "grpo").set_index(["first", "second", "quantity"])
    # grpo - control over the seeds both have (0-3): 0.9, 2.0, 0.3, 1.4
    d = np.array([0.9, 2.0, 0.3, 1.4])
    r = t.loc[("grpo", FROZEN, "contrast_tokens")]
    h = stats.t.ppf(0.95, 3) * d.std(ddof=1) / 2
    assert (r["n"], r["mean"]) == (4, pytest.approx(1.15))
    assert (r["lo"], r["hi"]) == (pytest.approx(1.15 - h), pytest.approx(1.15 + h))
    assert (r["n_pos"], r["n_neg"]) == (4, 0)
    assert r["wilcoxon_p"] == pytest.approx(0.125)  # all four of one sign: 2 / 2^4
    # Welch's interval of the same difference treats all five GRPO seeds and four control seeds
    # as independent
    ci = stats.ttest_ind(grpo, ctrl[:4], equal_var=False).confidence_interval(0.9)
    assert (r["welch_lo"], r["welch_hi"]) == (pytest.approx(ci.low), pytest.approx(ci.high))
    assert r["predicted"] == 1.0
    # GRPO - Dr. GRPO over all five seeds: 0.8, 1.9, 0.5, 1.6, 2.7, predicted 1 - 0
    g = t.loc[("grpo", "dr_grpo", "contrast_tokens")]
    assert (g["n"], g["mean"], g["predicted"]) == (5, pytest.approx(1.5), 1.0)
    assert t.loc[("grpo", "dr_grpo", "d_correct_tokens"), "mean"] == pytest.approx(-0.75)
    assert t.loc[("grpo", "dr_grpo", "d_correct_tokens"), "predicted"] == -0.5
    # the detectable shift: the paired test's (se = sd(d) / sqrt(5), 4 degrees of freedom)
    se = np.std([0.8, 1.9, 0.5, 1.6, 2.7], ddof=1) / np.sqrt(5)
    assert g["detectable"] == pytest.approx(3.03971 * se, rel=1e-5)  # noncentral t, df 4
    pairs = set(zip(t.reset_index()["first"], t.reset_index()["second"], strict=True))
    assert pairs == {("grpo", FROZEN), ("dr_grpo", FROZEN), ("grpo", "dr_grpo")}


def test_paired_table_without_a_control_or_a_reference():
    runs = _runs([1.0, 2.0, 3.0], [0.0, 0.1, 0.2], [])
    t = paired_table(runs, "grpo")
    assert set(t["second"]) == {"dr_grpo"}  # no control trained: only the reference's pairs
    t = paired_table(runs[runs["dial"] != "grpo"], "grpo")
    assert t.empty  # neither pair exists


def test_a_ratio_that_holds_seed_by_seed_has_a_point_interval():
    ref = np.array([1.0, 3.0, 2.0, 5.0])
    ctrl = np.array([0.5, -0.2, 0.1, 0.3])
    x = ctrl + 0.47 * (ref - ctrl)  # net of the control, 0.47 of the reference on every seed
    r = seed_ratio(x, ref, ctrl)
    assert r["net_ratio"] == pytest.approx(0.47)
    assert (r["net_lo"], r["net_hi"]) == (pytest.approx(0.47), pytest.approx(0.47))
    assert r["ratio"] == pytest.approx(x.mean() / ref.mean())
    assert r["lo"] <= r["ratio"] <= r["hi"] and r["lo"] < r["hi"]


def test_the_bootstrap_interval_is_the_delta_methods_at_many_seeds():
    rng = np.random.default_rng(3)
    n = 400
    ref = rng.normal(2.0, 1.0, n)
    x = 0.5 * ref + rng.normal(0.0, 0.5, n)
    r = seed_ratio(x, ref, draws=4000)
    # delta method: var(mx / my) ~ (var(x) - 2 R cov(x, y) + R^2 var(y)) / (n my^2)
    rr = x.mean() / ref.mean()
    v = (x.var(ddof=1) - 2 * rr * np.cov(x, ref)[0, 1] + rr**2 * ref.var(ddof=1))
    h = stats.norm.ppf(0.95) * np.sqrt(v / n) / ref.mean()
    assert r["lo"] == pytest.approx(rr - h, abs=0.15 * h)
    assert r["hi"] == pytest.approx(rr + h, abs=0.15 * h)


def test_a_denominator_that_crosses_zero_leaves_the_ratio_unbounded():
    ref = np.array([1.0, -1.2, 0.9, -0.8, 0.3])  # mean 0.04, its draws take both signs
    r = seed_ratio(np.array([0.5, 0.4, 0.6, 0.5, 0.5]), ref)
    assert r["ratio"] == pytest.approx(2.5 / 0.2)
    assert (r["lo"], r["hi"]) == (-np.inf, np.inf)
    short = seed_ratio(np.array([1.0, 2.0]), np.array([1.0, 2.0]))
    assert np.isnan(short["ratio"]) and short["n"] == 2  # below three seeds: none
    zero = seed_ratio(np.array([1.0, 2.0, 3.0]), np.array([1.0, -1.0, 0.0]))
    assert np.isnan(zero["ratio"])  # a zero mean denominator: no ratio


def test_ratio_table_aligns_the_seeds_and_gives_the_predicted_ratio():
    grpo = [1.0, 2.0, 4.0, 3.0]
    dr = [0.5, 1.0, 2.0, 99.0]  # seed 3 has no control: left out of the ratio
    ctrl = [0.0, 0.0, 0.0, None]
    t = ratio_table(_runs(grpo, dr, ctrl), "grpo")
    r = t.set_index("quantity").loc["contrast_tokens"]
    assert (r["dial"], r["reference"], r["n"]) == ("dr_grpo", "grpo", 3)
    assert r["ratio"] == pytest.approx(0.5) and r["net_ratio"] == pytest.approx(0.5)
    assert (r["lo"], r["hi"]) == (pytest.approx(0.5), pytest.approx(0.5))
    assert r["predicted"] == 0.0  # Dr. GRPO's 0 over GRPO's 1
    assert t.set_index("quantity").loc["d_correct_tokens", "ratio"] == pytest.approx(0.5)
    assert set(t["dial"]) == {"dr_grpo"}  # neither the reference nor the control


def test_the_summary_prints_the_paired_and_ratio_tables():
    from grpo_dial.analysis.aware.dose import dose_fit, dose_table
    from grpo_dial.analysis.aware.dose_report import dose_markdown

    runs = _runs([1.0, 2.0, 4.0, 3.0], [0.5, 1.0, 2.0, 1.5], [0.0, 0.1, 0.0, -0.1])
    blind = runs[runs["dial"] != FROZEN]  # the control is one cell, at a = 0.6
    runs = pd.concat([runs, blind.assign(level="a0", a=0.0, pred_contrast_tokens=0.0,
                                        pred_d_wrong_tokens=0.0, pred_d_correct_tokens=0.0,
                                        contrast_tokens=0.0)])  # fmt: skip
    runs = runs.assign(takeoff=0, awareness=runs["a"], truncation_last=0.0, contrast=0.0,
                       d_wrong=0.0, d_common=0.0)  # fmt: skip
    dose = dose_table(runs)
    paired, ratios = paired_table(runs, "grpo"), ratio_table(runs, "grpo")
    lines = dose_markdown(dose, dose_fit(dose), "", None, paired, ratios).splitlines()
    row = next(x for x in lines if x.startswith("| 0.6 | grpo - dr_grpo |")).split(" | ")
    # 0.5, 1, 2, 1.5: mean 1.25, sd 0.6455, t(0.95, 3) 2.3534 -> +-0.76; Wilcoxon 2 / 2^4
    assert row[2] == "+1.25 [+0.49, +2.01] (0.12)" and row[3] == "+1.00"
    ratio = next(x for x in lines if x.startswith("| 0.6 | dr_grpo | contrast_tokens |"))
    cells = ratio.split(" | ")[3:]
    assert cells[0] == "+0.50 [+0.50, +0.50]" and cells[2] == "+0.00 |"
    # net: (0.5, 0.9, 2, 1.6) over (1, 1.9, 4, 3.1); a ratio of means is a weighted mean of the
    # seeds' ratios (0.5, 0.474, 0.5, 0.516), so every bootstrap draw lies between them
    r = ratios.set_index(["level", "dial", "quantity"]).loc[("a60", "dr_grpo", "contrast_tokens")]
    assert r["net_ratio"] == pytest.approx(5.0 / 10.0)
    assert 0.9 / 1.9 <= r["net_lo"] < r["net_hi"] <= 1.6 / 3.1
    assert cells[1] == f"+0.50 [{r['net_lo']:+.2f}, {r['net_hi']:+.2f}]"
    blind = next(x for x in lines if x.startswith("| 0.0 | dr_grpo | contrast_tokens |"))
    assert blind.endswith("| n/a | n/a | n/a |")  # GRPO's 0 drift and prediction: no ratio


def test_the_prediction_prefers_the_closed_form_then_adams_first_order_step():
    from grpo_dial.analysis.aware.paired import prediction

    runs = pd.DataFrame({"pred_x": [1.0, np.nan, np.nan, np.nan],
                         "adam1_x": [9.0, 2.0, np.nan, np.nan],
                         "adam_x": [9.0, 9.0, 3.0, np.nan]})  # fmt: skip
    assert prediction(runs, "x").tolist() == pytest.approx([1.0, 2.0, 3.0, np.nan], nan_ok=True)
    only = prediction(runs[["adam_x"]], "x")
    assert only.tolist() == pytest.approx([9.0, 9.0, 3.0, np.nan], nan_ok=True)
    assert prediction(runs, "y").isna().all() and prediction(runs, "y").dtype == float


def test_paired_and_ratio_tables_at_another_level_with_a_second_arms_prediction():
    grpo, dr, ctrl = [1.0, 2.0, 0.5, 1.5], [0.6, 0.9, 0.1, 0.8], [0.1, 0.0, 0.2, 0.1]
    runs = _runs(grpo, dr, ctrl)
    runs.loc[runs["dial"] == "grpo", "pred_contrast_tokens"] = 2.0
    runs.loc[runs["dial"] == "dr_grpo", "pred_contrast_tokens"] = 0.5  # a push of its own
    t = paired_table(runs, "grpo", level=0.8).set_index(["first", "second", "quantity"])
    r = t.loc[("grpo", "dr_grpo", "contrast_tokens")]
    d = np.array(grpo) - np.array(dr)  # 0.4, 1.1, 0.4, 0.7
    h = stats.t.ppf(0.9, 3) * d.std(ddof=1) / 2  # an 80 % interval
    assert (r["lo"], r["hi"]) == (pytest.approx(d.mean() - h), pytest.approx(d.mean() + h))
    ci = stats.ttest_ind(grpo, dr, equal_var=False).confidence_interval(0.8)
    assert (r["welch_lo"], r["welch_hi"]) == (pytest.approx(ci.low), pytest.approx(ci.high))
    assert r["predicted"] == pytest.approx(1.5)  # 2.0 - 0.5
    ratio = ratio_table(runs, "grpo", level=0.5).set_index("quantity").loc["contrast_tokens"]
    assert ratio["predicted"] == pytest.approx(0.25)  # 0.5 / 2.0
    wide = ratio_table(runs, "grpo").set_index("quantity").loc["contrast_tokens"]
    assert wide["lo"] <= ratio["lo"] <= ratio["hi"] <= wide["hi"]  # 50 % inside 90 %
    assert ratio["hi"] - ratio["lo"] < wide["hi"] - wide["lo"]


def test_tables_keep_the_runs_order_and_skip_a_level_without_the_reference():
    a80 = _runs([1.0, 2.0, 3.0], [0.5, 1.0, 1.5], [0.0, 0.0, 0.0]).assign(level="a80", a=0.8)
    a0 = _runs([1.0, 2.0, 3.0], [0.5, 1.0, 1.5], []).assign(level="a0", a=0.0)
    a0 = a0[a0["dial"] != "grpo"]  # no reference at a0
    a20 = a80[a80["dial"] != FROZEN].assign(level="a20", a=0.2)  # the control is one cell
    runs = pd.concat([a80, a0, a20], ignore_index=True)
    ratios = ratio_table(runs, "grpo")
    assert list(dict.fromkeys(ratios["level"])) == ["a80", "a20"]  # a0 skipped, not the rest
    assert ratios["a"].tolist()[:3] == [0.8, 0.8, 0.8]
    paired = paired_table(runs, "grpo")
    assert list(dict.fromkeys(paired["level"])) == ["a80", "a0", "a20"]
    empty = paired_table(runs.iloc[:0], "grpo")
    assert empty.empty and list(empty.columns) == list(paired.columns)
    assert list(ratio_table(runs.iloc[:0], "grpo").columns) == list(ratios.columns)
    # no control trained: the ratio stands, its net does not
    bare = ratio_table(runs[runs["dial"] != FROZEN], "grpo").iloc[0]
    assert bare["ratio"] == pytest.approx(0.5) and np.isnan(bare["net_ratio"])


def test_seed_ratio_is_seeded_and_reads_the_net_when_the_raw_mean_is_zero():
    rng = np.random.default_rng(11)
    ref = rng.uniform(0.5, 1.5, 12)
    x = 0.5 * ref + rng.normal(0.0, 0.2, 12)
    same = pd.Series(seed_ratio(x, ref)).equals(pd.Series(seed_ratio(x, ref, seed=0)))
    assert same  # the default seed, drawn once
    assert seed_ratio(x, ref, seed=3)["hi"] != seed_ratio(x, ref)["hi"]  # the draws matter
    ref0 = np.array([1.0, -1.0, 2.0, -2.0])  # mean 0: no raw ratio
    r = seed_ratio(np.array([0.5, 0.5, 1.0, 1.0]), ref0, ctrl=np.array([-1.0, -3.0, 0.0, -4.0]))
    # x - ctrl: 1.5, 3.5, 1, 5 (mean 2.75); ref - ctrl: 2, 2, 2, 2 (mean 2)
    assert np.isnan(r["ratio"]) and r["net_ratio"] == pytest.approx(2.75 / 2.0)
    assert set(seed_ratio(x[:2], ref[:2])) == {"n", "ratio", "lo", "hi", "net_ratio", "net_lo",
                                               "net_hi"}  # fmt: skip


def test_a_ratio_interval_is_unbounded_exactly_past_the_tail():
    from grpo_dial.analysis.aware.paired import _boot_interval

    num = np.arange(100.0)
    den = np.ones(100)
    assert _boot_interval(num, den, 0.9) == pytest.approx(np.quantile(num, [0.05, 0.95]))
    den[:6] = -1.0  # 6 % of the draws on the other side: past a 90 % interval's 5 % tail
    assert _boot_interval(num, den, 0.9) == (-np.inf, np.inf)
    den[:25] = -1.0  # a 50 % interval's tail is exactly 25 %: at it, still bounded
    lo, hi = _boot_interval(num, den, 0.5)
    assert np.isfinite([lo, hi]).all() and lo < hi
    den[:26] = -1.0
    assert _boot_interval(num, den, 0.5) == (-np.inf, np.inf)
