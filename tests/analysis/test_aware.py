"""Tests for the aware-tail analysis (analysis/aware/runs.py, analysis/aware/seeds.py) and the
real-model bridge (analysis/aware/bridge.py), on tables whose answers are computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from grpo_dial.analysis.aware.bridge import length_bridge
from grpo_dial.analysis.aware.runs import predicted_step, run_decomposition, run_drift, step_table
from grpo_dial.analysis.aware.seeds import (
    decomposition_table,
    drift_table,
    fisher_p,
    mann_whitney_p,
    rank_tests,
    truncation_table,
)
from grpo_dial.core.dial import preset
from grpo_dial.core.length_drift import tail_drift


def _responses() -> pd.DataFrame:
    # step 0: one group of 4: (~, wrong, tail 4), (~, right, 2), (=, right, 1), (=, wrong, 3)
    # step 1: the same modes and verdicts, tails 8, 2, 1, 3
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


def test_step_table_by_hand():
    s = step_table(_responses())
    r0 = s.iloc[0]
    assert r0["accuracy"] == 0.5
    # P(~ | wrong) = 1/2, P(~ | right) = 1/2: this toy's mode is blind
    assert r0["awareness"] == 0.0
    assert (r0["tail_estimate"], r0["tail_compute"]) == (3.0, 2.0)
    assert (r0["tail_wrong"], r0["tail_correct"]) == (3.5, 1.5)
    assert r0["core"] == 4.0  # mode + 2 digits + EOS
    assert r0["auc_tail"] == 1.0  # both wrong tails exceed both right ones
    assert s.iloc[1]["theta_estimate"] == pytest.approx(np.log(5.0))
    with pytest.raises(ValueError, match="prefix"):
        step_table(_responses().drop(columns="prefix"))


def test_predicted_step_matches_the_closed_form_and_vanishes_where_it_must():
    steps = pd.DataFrame(
        {"accuracy": [0.5], "awareness": [0.6], "tail_estimate": [3.0], "tail_compute": [3.0],
         "core": [6.0]}
    )  # fmt: skip
    uw, uc = predicted_step(steps, preset("grpo"), 8, 16)
    g = preset("grpo")
    ref = tail_drift(0.5, 0.75, 0.75, 6.0, 8, 1.0, "sequence", 0.6, ddof=g.std_ddof, eps=g.eps)
    assert uw[0] == pytest.approx(float(ref.wrong)) and uc[0] == pytest.approx(float(ref.correct))
    assert uw[0] > 0 > uc[0]
    assert predicted_step(steps, preset("dr_grpo"), 8, 16)[0][0] == 0.0
    blind = steps.assign(awareness=0.0)
    for name in ("grpo", "dapo", "lambda_grpo"):
        assert predicted_step(blind, preset(name), 8, 16)[0][0] == pytest.approx(0.0, abs=1e-15)


def _base(te: float, tc: float, tw: float, tcor: float, n: int = 4) -> pd.DataFrame:
    """A base policy's one-row step table (step 0) with these mean tails."""
    return pd.DataFrame(
        [{"step": 0, "accuracy": 0.5, "awareness": 0.6, "core": 4.0, "auc_tail": 0.5,
          "tail_estimate": te, "tail_compute": tc, "tail_wrong": tw, "tail_correct": tcor,
          "n_estimate": n, "n_compute": n, "n_wrong": n, "n_correct": n, "truncation": 0.25}]
    )  # fmt: skip


def test_run_drift_against_the_base_in_log_one_plus_tokens():
    s = step_table(_responses())
    train = pd.DataFrame({"grad_norm": [0.5, 2.0]})
    d = run_drift(s, train, preset("grpo"), 4, 1, lr=0.1, grad_clip=1.0, fraction=0.5,
                  base=_base(1.0, 3.0, 2.0, 0.5))  # fmt: skip
    # last window (step 1): T~ = (8 + 2) / 2 = 5, T= = (1 + 3) / 2 = 2; wrong 5.5, correct 1.5
    assert d["d_wrong"] == pytest.approx(np.log(6 / 2))
    assert d["d_correct"] == pytest.approx(np.log(3 / 4))
    assert d["contrast"] == pytest.approx(np.log(3) - np.log(0.75))
    assert d["d_common"] == pytest.approx((np.log(3) + np.log(0.75)) / 2)
    assert (d["d_wrong_tokens"], d["d_correct_tokens"]) == (4.0, -1.0)
    assert d["contrast_tokens"] == 5.0
    assert (d["d_tail_wrong_resp"], d["d_tail_correct_resp"]) == (3.5, 1.0)
    assert d["takeoff"] == 1  # log(4) > 0.5
    assert (d["truncation_base"], d["truncation_last"]) == (0.25, 0.0)
    # the prediction at the base's state (p 0.5, a 0.6, E[T~] 1, E[T=] 3, core 4), lr x 2 steps
    u = tail_drift(0.5, 0.5, 0.75, 4.0, 4, 1.0, "sequence", 0.6, eps=1e-6)
    assert d["pred_wrong"] == pytest.approx(0.1 * 2 * float(u.wrong), rel=1e-9)
    assert d["clip_share"] == 0.5 and d["grad_norm"] == 1.25
    # a collapsed last window: log(1 + 0) = 0, no floor set by the response count
    collapsed = _responses().assign(tokens=lambda r: np.where(r["step"] == 1, 4, r["tokens"]))
    c = run_drift(step_table(collapsed), train, preset("grpo"), 4, 1, 0.1, 1.0, 0.5,
                  _base(1.0, 3.0, 2.0, 0.5))  # fmt: skip
    assert c["d_wrong"] == pytest.approx(-np.log(2)) and c["d_correct"] == pytest.approx(-np.log(4))
    # without a base the first window is the reference: step 0, T~ = 3, T= = 2
    f = run_drift(s, train, preset("grpo"), 4, 1, 0.1, 1.0, 0.5)
    assert f["d_wrong"] == pytest.approx(np.log(6 / 4)) and f["d_correct"] == 0.0


def test_rank_tests_and_fisher_by_hand():
    r = rank_tests([0.3, 1.2, 2.0, 0.7, 5.0, 0.0, np.nan])
    assert (r["n_pos"], r["n_neg"]) == (5, 0)
    assert r["sign_p"] == pytest.approx(2 * 0.5**5)  # 5 of 5 nonzero up
    assert r["wilcoxon_p"] == pytest.approx(2 / 2**5)  # exact: 1 of 32 sign patterns each side
    # 2 up, 1 down: P(X <= 1) = 4/8, two-sided 1; ranks 1, 2, 3, W- = 1: P(W- <= 1) = 2/8
    r = rank_tests([-1.0, 2.0, 3.0])
    assert r["sign_p"] == pytest.approx(1.0) and r["wilcoxon_p"] == pytest.approx(0.5)
    assert np.isnan(rank_tests([0.0, 0.0])["sign_p"])
    # 5 of 10 against 0 of 10: 2 x C(10,5)^2 / C(20,10) / ... = 0.0325 (the hypergeometric tail)
    tail = sum(math.comb(10, k) * math.comb(10, 5 - k) for k in (0, 5)) / math.comb(20, 5)
    assert fisher_p(5, 10, 0, 10) == pytest.approx(tail)
    assert np.isnan(fisher_p(1, 0, 0, 3))
    assert mann_whitney_p([1, 2, 3], [4, 5, 6]) == pytest.approx(0.1)  # exact: 2 / C(6, 3)


def _runs() -> pd.DataFrame:
    """grpo: 3 seeds, 2 took off; dr_grpo: 3 seeds, none; the quantities by hand."""
    s = step_table(_responses())
    d = run_drift(s, pd.DataFrame({"grad_norm": [0.5]}), preset("grpo"), 4, 1, 0.1, 1.0, 0.5,
                  _base(1.0, 3.0, 2.0, 0.5))  # fmt: skip
    rows = []
    for k, c in enumerate((2.0, 1.0, 0.1)):
        rows.append({**d, "dial": "grpo", "seed": k, "contrast": c, "takeoff": int(c > 0.5),
                     "u_wrong": 0.02, "truncation_last": 0.01 * k})  # fmt: skip
    for k, c in enumerate((0.1, -0.2, 0.0)):
        rows.append({**d, "dial": "dr_grpo", "seed": k, "contrast": c, "takeoff": 0,
                     "u_wrong": 0.0, "truncation_last": 0.0})  # fmt: skip
    return pd.DataFrame(rows)


def test_drift_table_holds_the_rank_tests_take_offs_and_predictions():
    t = drift_table(_runs(), snr={"grpo": 2.0, "dr_grpo": 0.1}).set_index(["dial", "quantity"])
    g, dr = t.loc[("grpo", "contrast")], t.loc[("dr_grpo", "contrast")]
    assert g["mean"] == pytest.approx(3.1 / 3) and g["n_seeds"] == 3
    assert (g["n_pos"], g["sign_p"]) == (3, pytest.approx(0.25))
    assert (g["n_up"], g["n_down"], dr["n_up"]) == (2, 0, 0)
    assert g["takeoff_p"] == pytest.approx(fisher_p(2, 3, 0, 3)) and np.isnan(dr["takeoff_p"])
    assert dr["mwu_p"] == pytest.approx(mann_whitney_p([0.1, -0.2, 0.0], [2.0, 1.0, 0.1]))
    assert dr["ratio_snr"] == pytest.approx(0.05) and dr["ratio_sgd"] == 0.0
    assert g["truncation_last"] == 0.02
    # the base value: log(1 + T~_base) for d_wrong, tokens for d_wrong_tokens
    assert t.loc[("grpo", "d_wrong"), "base"] == pytest.approx(np.log(2.0))
    assert t.loc[("grpo", "d_wrong_tokens"), "base"] == 1.0
    with pytest.raises(ValueError, match="reference"):
        drift_table(_runs(), reference="nope")
    no_null = drift_table(_runs(), null=None).set_index(["dial", "quantity"])
    assert np.isnan(no_null.loc[("grpo", "contrast"), "takeoff_p"])


def test_truncation_table_per_window():
    runs = _runs().assign(truncation_first=0.5)
    t = truncation_table(runs).set_index(["dial", "window"])
    assert t.loc[("grpo", "last"), "mean"] == pytest.approx(0.01)
    assert t.loc[("grpo", "last"), "max"] == pytest.approx(0.02)
    assert t.loc[("dr_grpo", "base"), "mean"] == 0.25 and t.loc[("grpo", "first"), "max"] == 0.5


def test_decomposition_in_tokens_against_the_base():
    dec = decomposition_table(
        pd.DataFrame([{"dial": "a", "seed": k, "total": k, "mix": 0, "within_correct": 0,
                       "within_incorrect": k} for k in range(4)])
    ).set_index(["dial", "term"])  # fmt: skip
    assert dec.loc[("a", "total"), "mean"] == 1.5
    resp = _responses()
    base = resp[resp["step"] == 0].assign(step=0, tokens=4)  # every base tail 0 (core 3 + EOS)
    terms = run_decomposition(resp, 0.5, base)
    # the last window's tokens: 12, 6, 5, 7 (mean 7.5) against 4 each
    assert terms["total"] == pytest.approx(3.5)
    assert terms["within_incorrect"] == pytest.approx(0.5 * (9.5 - 4))  # wrong: 12 and 7
    assert terms["within_correct"] == pytest.approx(0.5 * (5.5 - 4))


def _groups(wrong_longer: bool) -> pd.DataFrame:
    rows = []
    for g in range(12):
        for i in range(8):
            correct = i < 4
            if wrong_longer:
                length = 100 + 10 * i + g  # every wrong response is longer than every right one
            else:
                length = 100 + 10 * (i % 4) + g  # the same lengths in both classes
            rows.append({"problem_id": f"p{g}", "correct": correct, "length_chars": length})
    return pd.DataFrame(rows)


def test_bridge_aware_and_blind():
    aware = length_bridge(_groups(True), n_boot=50).set_index("quantity")
    assert aware.loc["auc", "value"] == 1.0 and aware.loc["awareness", "value"] == 1.0
    assert aware.loc["pressure_wrong", "value"] > 0  # long wrong answers: pushed longer
    assert aware.loc["u_wrong", "value"] > 0 > aware.loc["u_correct", "value"]
    blind = length_bridge(_groups(False), n_boot=50).set_index("quantity")
    assert blind.loc["auc", "value"] == 0.5
    assert blind.loc["u_wrong", "value"] == 0.0
    assert blind.loc["pressure_net", "value"] == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError, match="lacks"):
        length_bridge(_groups(True).drop(columns="correct"))


def test_summary_lines_and_figures_from_the_tables(tmp_path):
    from grpo_dial.analysis.aware.section import summary_lines
    from grpo_dial.figures import save
    from grpo_dial.figures.aware import aware_figure, decomposition_figure

    runs = _runs()
    drift = drift_table(runs, snr={"grpo": 2.0, "dr_grpo": 0.1})
    lines = summary_lines(drift)
    assert lines[0].startswith("- Aware tail")
    g = next(x for x in lines if x.startswith("  - grpo:"))
    assert "sign p 0.25" in g and "take-offs 2 / 0 of 3" in g and "SNR 1.00" in g
    assert "truncated at most 2.0 %" in g
    s = step_table(_responses())
    steps = s.assign(dial="grpo", seed=0)
    fig = aware_figure(steps, drift, _base(1.0, 3.0, 2.0, 0.5), names={"grpo": "G-label"},
                       runs=runs)  # fmt: skip
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels == ["G-label", "base policy (step 0)"]
    assert [t.get_text() for t in fig.axes[2].get_yticklabels()] == ["G-label", "dr_grpo"]
    assert fig.axes[2].get_xlabel().startswith("contrast drift / G-label's")
    assert "2 of 3 seeds took off" in fig.texts[0].get_text()
    save(fig, tmp_path / "a.png")
    dec = decomposition_table(
        pd.DataFrame([{"dial": "grpo", "seed": k, "total": k, "mix": 0, "within_correct": 0,
                       "within_incorrect": k} for k in range(3)])
    )  # fmt: skip
    fig = decomposition_figure(dec, names={"grpo": "G-label"})
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["G-label"]
    assert fig.texts[0].get_text().endswith("within incorrect: G-label +1.00")
    assert fig.axes[0].get_xlabel() == "tokens"
    save(fig, tmp_path / "d.png")
    assert (tmp_path / "a.png").stat().st_size > 0 and (tmp_path / "d.png").stat().st_size > 0
