"""Tests for the aware-tail analysis (analysis/aware.py) and the real-model bridge
(analysis/aware_bridge.py), on tables whose answers are computed by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from grpo_dial.analysis.aware import (
    decomposition_table,
    drift_table,
    predicted_step,
    run_drift,
    step_table,
)
from grpo_dial.analysis.aware_bridge import length_bridge
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


def test_run_drift_and_tables():
    s = step_table(_responses())
    train = pd.DataFrame({"grad_norm": [0.5, 2.0]})
    d = run_drift(s, train, preset("grpo"), 4, 1, lr=0.1, grad_clip=1.0, fraction=0.5)
    # theta pools a window's tails of one mode plus half a token: (8 + 2 + 0.5) / 2 against
    # (4 + 2 + 0.5) / 2 in the estimate mode, (1 + 3 + 0.5) / 2 both times in the compute mode
    assert d["d_wrong"] == pytest.approx(np.log(10.5 / 6.5))
    assert d["d_correct"] == 0.0
    assert d["contrast"] == pytest.approx(np.log(10.5 / 6.5))
    collapsed = _responses().assign(tokens=lambda r: np.where(r["step"] == 1, 4, r["tokens"]))
    c = run_drift(step_table(collapsed), train, preset("grpo"), 4, 1, 0.1, 1.0, 0.5)
    assert c["d_wrong"] == pytest.approx(np.log(0.5 / 2) - np.log(6.5 / 2))  # finite floor
    assert c["d_correct"] == pytest.approx(np.log(0.5 / 2) - np.log(4.5 / 2))
    assert d["clip_share"] == 0.5 and d["grad_norm"] == 1.25
    runs = pd.DataFrame(
        [{"dial": "grpo", "seed": k, **d, "d_wrong": 1.0 + 0.1 * k, "u_wrong": 0.01}
         for k in range(3)]
        + [{"dial": "dr", "seed": k, **d, "d_wrong": 0.5 + 0.05 * k, "u_wrong": 0.0}
           for k in range(3)]
    )  # fmt: skip
    t = drift_table(runs).set_index(["dial", "quantity"])
    assert t.loc[("grpo", "d_wrong"), "ratio"] == pytest.approx(1.0)
    assert t.loc[("dr", "d_wrong"), "ratio"] == pytest.approx(0.5)
    assert t.loc[("dr", "d_wrong"), "ratio_sgd"] == 0.0
    assert t.loc[("grpo", "d_wrong"), "lo"] < 1.1 < t.loc[("grpo", "d_wrong"), "hi"]
    dec = decomposition_table(
        pd.DataFrame(
            [
                {
                    "dial": "a",
                    "seed": k,
                    "total": k,
                    "mix": 0,
                    "within_correct": 0,
                    "within_incorrect": k,
                }
                for k in range(4)
            ]
        )  # fmt: skip
    ).set_index(["dial", "term"])
    assert dec.loc[("a", "total"), "mean"] == 1.5
    with pytest.raises(ValueError, match="reference"):
        drift_table(runs, reference="nope")


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
    from grpo_dial.analysis.aware import summary_lines
    from grpo_dial.figures import save
    from grpo_dial.figures.aware import aware_figure, decomposition_figure

    s = step_table(_responses())
    d = run_drift(s, pd.DataFrame({"grad_norm": [0.5]}), preset("grpo"), 4, 1, 0.1, 1.0, 0.5)
    runs = pd.DataFrame(
        [{"dial": a, "seed": k, **d, "contrast": c + 0.1 * k, "u_wrong": 0.01}
         for a, c in (("grpo", 0.02), ("dr_grpo", 0.5)) for k in range(3)]
    )  # fmt: skip
    drift = drift_table(runs)  # GRPO's mean near 0: ratios fall outside their percentiles
    lines = summary_lines(drift)
    assert lines[0].startswith("- Aware tail") and "grpo +0.120" in lines[0]
    steps = s.assign(dial="grpo", seed=0)
    fig = aware_figure(steps, drift, names={"grpo": "G-label"})
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == ["G-label"]
    assert [t.get_text() for t in fig.axes[2].get_yticklabels()] == ["G-label", "dr_grpo"]
    assert fig.axes[2].get_xlabel().startswith("contrast drift / G-label's")
    save(fig, tmp_path / "a.png")
    dec = decomposition_table(
        pd.DataFrame(
            [
                {
                    "dial": "grpo",
                    "seed": k,
                    "total": k,
                    "mix": 0,
                    "within_correct": 0,
                    "within_incorrect": k,
                }
                for k in range(3)
            ]
        )  # fmt: skip
    )
    fig = decomposition_figure(dec, names={"grpo": "G-label"})
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["G-label"]
    assert fig.texts[0].get_text().endswith("within incorrect: G-label +1.00")
    save(fig, tmp_path / "d.png")
    assert (tmp_path / "a.png").stat().st_size > 0 and (tmp_path / "d.png").stat().st_size > 0
