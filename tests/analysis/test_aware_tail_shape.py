"""The wrong mode's readings (analysis/aware/tail_shape.py): the base tail per mode by hand, and
each reading against the closed form's pieces."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from grpo_dial.analysis.aware.dose import level_awareness, sgd_prediction
from grpo_dial.analysis.aware.grid import FROZEN
from grpo_dial.analysis.aware.tail_shape import mode_tails, shape_markdown, shape_table
from grpo_dial.core.dial import arm_fields, read_arm
from grpo_dial.core.tail_shape import geometric_pmf, tail_push

TRAIN = {"group_size": 8, "prompts_per_step": 16}
OPTIONS = {"estimate_rate": 0.5}


def _responses(wrong, correct) -> pd.DataFrame:
    rows = [{"prefix": f"{m}12", "redundant": t} for m, ts in (("~", wrong), ("=", correct))
            for t in ts]  # fmt: skip
    return pd.DataFrame(rows)


def test_mode_tails_by_hand():
    t = mode_tails(_responses([0, 2, 2, 4], [1, 1, 3, 3]), core=5.0).set_index("mode")
    w = t.loc["wrong"]
    assert (w["n"], w["mean"], w["p0"], w["var"]) == (4, 2.0, 0.25, 2.0)
    assert w["p0_geometric"] == pytest.approx(1 / 3) and w["var_geometric"] == 6.0
    # wrong: P = (1/4, 0, 1/2, 0, 1/4), the distribution core/tail_shape reads (tested there)
    h, slope = tail_push([0.25, 0.0, 0.5, 0.0, 0.25], 5.0)
    assert (w["h"], w["slope"]) == (pytest.approx(h), pytest.approx(slope))
    hg, sg = tail_push(geometric_pmf(2.0, 4000), 5.0)
    assert (w["h_geometric"], w["slope_geometric"]) == (pytest.approx(hg), pytest.approx(2.0))
    assert t.loc["correct", "p0"] == 0.0 and t.loc["correct", "mean"] == 2.0
    with pytest.raises(ValueError, match="no response in mode '='"):
        mode_tails(_responses([1, 2], []), core=5.0)


def _setup(k_ec: float):
    base = pd.DataFrame([{"core": 5.5, "tail_estimate": 3.0, "tail_compute": 3.0}])
    kernel = pd.DataFrame([{"k_ee": 0.06, "k_ec": k_ec, "k_cc": 0.07}])
    arms = {d: arm_fields(read_arm({"preset": d})) for d in ("grpo", "dr_grpo")}
    lr, n = 2.0, 50.0
    rows = []
    for lev, a in (("a0", 0.0), ("a80", 0.8)):
        step = sgd_prediction(read_arm({"preset": "grpo"}).dial, base, kernel, lev, OPTIONS, TRAIN)
        for seed in range(3):
            for d in ("grpo", "dr_grpo"):
                rows.append({"optimizer": "sgd", "level": lev, "a": a, "dial": d, "seed": seed,
                             "pred_theta_wrong": step["step_wrong"] * lr * n,
                             "d_wrong_tokens": 0.0, "d_correct_tokens": 0.0})  # fmt: skip
    runs = pd.DataFrame(rows)
    paired = pd.DataFrame([{"optimizer": "sgd", "level": "a80", "first": "grpo",
                            "second": FROZEN, "quantity": q, "mean": 0.1, "lo": 0.0, "hi": 0.2}
                           for q in ("d_wrong_tokens", "d_correct_tokens")])  # fmt: skip
    return runs, paired, base, kernel, arms, lr, n


def test_each_reading_against_the_closed_forms_pieces():
    runs, paired, base, kernel, arms, lr, n = _setup(k_ec=0.0)
    # a non-geometric base tail of mean 3 in both modes
    tails = mode_tails(_responses([0, 2, 3, 3, 4, 6], [1, 2, 3, 3, 4, 5]), core=5.5)
    t = shape_table(runs, paired, tails, base, kernel, arms, TRAIN, OPTIONS, lr)
    assert set(t["dial"]) == {"grpo"}  # Dr. GRPO's constant normalizer has no 1/|o| reading
    r = t.set_index(["level", "mode"])
    step = sgd_prediction(read_arm({"preset": "grpo"}).dial, base, kernel, "a80", OPTIONS, TRAIN)
    geo = 3.0 * lr * n * 0.06 * step["u_wrong"]  # K_ec 0: the wrong mode's own push alone
    assert r.loc[("a80", "wrong"), "geometric"] == pytest.approx(geo)
    m = tails.set_index("mode").loc["wrong"]
    shape = (m["h"] / m["h_geometric"]) * (m["slope"] / 3.0)
    assert r.loc[("a80", "wrong"), "measured_tail"] == pytest.approx(geo * shape)
    # no drift: the runs end where they start, so the end state is the base's geometric reading
    assert r.loc[("a80", "wrong"), "end_state"] == pytest.approx(geo)
    assert r.loc[("a80", "wrong"), "drag"] == 0.0  # K_ec 0
    assert (r.loc[("a80", "correct"), "measured"], r.loc[("a80", "correct"), "lo"]) == (0.1, 0.0)
    assert np.isnan(r.loc[("a0", "wrong"), "measured"])  # no paired row given
    assert r.loc[("a0", "wrong"), ["geometric", "measured_tail", "end_state"]].tolist() == [0, 0, 0]
    text = shape_markdown(tails, t)
    assert "| 0.8 | grpo | wrong | +0.10 [+0.00, +0.20] |" in text


def test_the_drag_and_the_end_state_move_as_the_kernel_and_the_tails_say():
    runs, paired, base, kernel, arms, lr, n = _setup(k_ec=0.012)
    tails = mode_tails(_responses([1, 2, 3, 3, 4, 5], [1, 2, 3, 3, 4, 5]), core=5.5)
    runs.loc[runs["dial"] == "grpo", "d_correct_tokens"] = -1.0  # the right mode shrank to 2
    t = shape_table(runs, paired, tails, base, kernel, arms, TRAIN, OPTIONS, lr)
    r = t.set_index(["level", "mode"]).loc[("a80", "wrong")]
    step = sgd_prediction(read_arm({"preset": "grpo"}).dial, base, kernel, "a80", OPTIONS, TRAIN)
    assert r["drag"] == pytest.approx(3.0 * lr * n * 0.012 * step["u_correct"])
    assert r["drag"] < 0  # the right mode's shrinking push pulls the wrong mode down
    end = base.assign(tail_compute=2.0)
    e = sgd_prediction(read_arm({"preset": "grpo"}).dial, end, kernel, "a80", OPTIONS, TRAIN)
    want = 3.0 * lr * n * (0.06 * e["u_wrong"] + 0.012 * e["u_correct"])
    assert r["end_state"] == pytest.approx(want)
    assert r["end_state"] != pytest.approx(r["geometric"])


def test_the_tail_table_prints_each_mode_beside_its_geometric():
    tails = mode_tails(_responses([0, 2, 2, 4], [1, 1, 3, 3]), core=5.0)
    text = shape_markdown(tails, pd.DataFrame(columns=["a"])).splitlines()
    w = tails.set_index("mode").loc["wrong"]
    row = next(x for x in text if x.startswith("| wrong |"))
    assert row == (f"| wrong | 4 | 2.00 | 0.250 (0.333) | 2.0 (6.0) | {w['h']:.4f} "
                   f"({w['h_geometric']:.4f}) | {w['slope']:.2f} (2.00) |")  # fmt: skip


def test_adams_first_order_move_by_hand():
    """Two weights, two batches: g = (1, 2) and (3, 0); rms per weight sqrt(5), sqrt(2); with
    J_~ = (1, 0), J_= = (0, 1) the per-batch moves are -(g / rms): batch 1 (-1/sqrt5, -2/sqrt2),
    batch 2 (-3/sqrt5, 0); a batch without a gradient is NaN and left out of the rms."""
    import torch

    from grpo_dial.backends.own_cells import adam_moves

    g = [torch.tensor([1.0, 2.0], dtype=torch.float64), None,
         torch.tensor([3.0, 0.0], dtype=torch.float64)]  # fmt: skip
    jw = torch.tensor([1.0, 0.0], dtype=torch.float64)
    jc = torch.tensor([0.0, 1.0], dtype=torch.float64)
    out = adam_moves(g, jw, jc)
    r5, r2 = np.sqrt(5.0), np.sqrt(2.0)
    assert out["adam_wrong"][0] == pytest.approx(-1 / r5) and np.isnan(out["adam_wrong"][1])
    assert out["adam_wrong"][2] == pytest.approx(-3 / r5)
    assert out["adam_correct"] == pytest.approx([-2 / r2, np.nan, 0.0], nan_ok=True)
    assert out["adam_contrast"][0] == pytest.approx(-1 / r5 + 2 / r2)
    # the mean over batches is -J . E[g] / rms: Adam's steady step per unit lr
    assert np.nanmean(out["adam_wrong"]) == pytest.approx(-2 / r5)
    assert all(np.isnan(adam_moves([None], jw, jc)["adam_contrast"]))


def test_adam_first_order_scales_the_probes_move_by_the_runs_updates():
    from grpo_dial.analysis.aware.dose import adam_first_order

    base = pd.DataFrame([{"tail_estimate": 3.0, "tail_compute": 2.0}])
    batches = pd.DataFrame({"level": "a80", "dial": "grpo", "adam_wrong": [0.1, 0.3],
                            "adam_correct": [-0.2, -0.2]})  # fmt: skip
    runs = pd.DataFrame([
        {"optimizer": "adamw", "level": "a80", "dial": "grpo", "lr": 0.001, "updates": 50.0},
        {"optimizer": "sgd", "level": "a80", "dial": "grpo", "lr": 2.0, "updates": 50.0},
        {"optimizer": "adamw", "level": "a60", "dial": FROZEN, "lr": 0.0, "updates": 50.0},
        {"optimizer": "adamw", "level": "a20", "dial": "grpo", "lr": 0.001, "updates": 50.0},
    ])  # fmt: skip
    out = adam_first_order(runs, batches, base)
    # lr x updates = 0.05: wrong 0.2 x 0.05 = 0.01 theta, 0.03 tokens; correct -0.01, -0.02
    assert out.loc[0, "adam1_d_wrong_tokens"] == pytest.approx(0.03)
    assert out.loc[0, "adam1_d_correct_tokens"] == pytest.approx(-0.02)
    assert out.loc[0, "adam1_contrast_tokens"] == pytest.approx(0.05)
    assert np.isnan(out.loc[1, "adam1_contrast_tokens"])  # SGD: not Adam's
    assert out.loc[2, "adam1_contrast_tokens"] == 0.0  # the control's zero step
    assert np.isnan(out.loc[3, "adam1_contrast_tokens"])  # a cell the probe did not draw


def test_the_dose_table_prints_adams_first_order_prediction_and_its_power():
    from grpo_dial.analysis.aware.dose import dose_fit, dose_table
    from grpo_dial.analysis.aware.dose_report import dose_markdown

    rows = [{"optimizer": "adamw", "level": "a80", "a": 0.8, "dial": "grpo", "seed": k,
             "contrast_tokens": [0.1, 0.3, 0.2, 0.0][k], "d_wrong_tokens": 0.0,
             "d_correct_tokens": 0.0, "contrast": 0.0, "d_wrong": 0.0, "d_common": 0.0,
             "takeoff": 0, "awareness": 0.8, "truncation_last": 0.0, "snr_contrast": 3.0,
             "adam_contrast_tokens": 0.15, "adam1_contrast_tokens": 0.15}
            for k in range(4)]  # fmt: skip
    dose = dose_table(pd.DataFrame(rows))
    r = dose.set_index("quantity").loc["contrast_tokens"]
    assert r["adam_first_order"] == pytest.approx(0.15)
    assert r["power_first_order"] == pytest.approx(r["power"])  # the same prediction, same power
    row = next(x for x in dose_markdown(dose, dose_fit(dose)).splitlines()
               if x.startswith("| 0.8 | grpo | 4 |")).split(" | ")  # fmt: skip
    assert row[5] == "3.00 (+0.15; +0.15)"
    assert row[7] == f"{r['detectable']:.2f} ({100 * r['power_first_order']:.0f} %) |"
    assert "| SNR (one Adam coordinate; first order) |" in dose_markdown(dose, dose_fit(dose))


def test_the_right_mode_the_weights_setting_and_the_estimate_rate_are_read():
    """The right mode's readings by hand, the kernel row of the weights SGD moves, the task's
    estimate rate for a, the runs' order, and AdamW rows left out."""
    runs, paired, base, _, arms, lr, n = _setup(k_ec=0.0)
    kernel = pd.DataFrame([{"weights": "all", "k_ee": 60.0, "k_ec": 59.0, "k_cc": 61.0},
                           {"weights": "markers", "k_ee": 0.06, "k_ec": 0.012,
                            "k_cc": 0.07}])  # fmt: skip
    runs.loc[runs["dial"] == "grpo", "d_wrong_tokens"] = 0.5  # the wrong tail ends at 3.5
    adamw = runs[runs["level"] == "a80"].assign(optimizer="adamw", pred_theta_wrong=np.nan)
    runs = pd.concat([runs.iloc[::-1], adamw], ignore_index=True)  # a80 first, then a0
    tails = mode_tails(_responses([1, 2, 3, 3, 4, 5], [0, 2, 3, 3, 4, 6]), core=5.5)
    options = {"estimate_rate": 0.25}
    t = shape_table(runs, paired, tails, base, kernel, arms, TRAIN, options, lr, "markers")
    assert list(dict.fromkeys(t["level"])) == ["a80", "a0"] and len(t) == 4  # SGD rows only
    a = level_awareness("a80", 0.25)[1]  # the level's awareness at the task's estimate rate
    assert t["a"].tolist()[0] == pytest.approx(a) and a != pytest.approx(0.8)
    r = t.set_index(["level", "mode"])
    dial = read_arm({"preset": "grpo"}).dial
    markers = kernel.iloc[[1]].drop(columns="weights")
    step = sgd_prediction(dial, base, markers, "a80", options, TRAIN)
    k_ee, k_ec, k_cc = 0.06, 0.012, 0.07
    scale = lr * runs.loc[0, "pred_theta_wrong"] / (step["step_wrong"] * lr)
    uw, uc = step["u_wrong"], step["u_correct"]
    assert r.loc[("a80", "correct"), "geometric"] == pytest.approx(
        3.0 * scale * (k_ec * uw + k_cc * uc))
    m = tails.set_index("mode")
    rw, rc = (m.loc[x, "h"] / m.loc[x, "h_geometric"] for x in ("wrong", "correct"))
    assert r.loc[("a80", "correct"), "measured_tail"] == pytest.approx(
        m.loc["correct", "slope"] * scale * (k_ec * uw * rw + k_cc * uc * rc))
    assert r.loc[("a80", "correct"), "drag"] == pytest.approx(3.0 * scale * k_ec * uw)
    end = base.assign(tail_estimate=3.5)
    e = sgd_prediction(dial, end, markers, "a80", options, TRAIN)
    assert r.loc[("a80", "wrong"), "end_state"] == pytest.approx(
        3.5 * scale * (k_ee * e["u_wrong"] + k_ec * e["u_correct"]))
    assert list(t.columns) == list(shape_table(runs.iloc[:0], paired, tails, base, kernel, arms,
                                               TRAIN, options, lr, "markers").columns)


def test_the_shape_tables_headers_whole():
    tails = mode_tails(_responses([0, 2, 2, 4], [1, 1, 3, 3]), core=5.0)
    lines = shape_markdown(tails, pd.DataFrame(columns=["a"])).splitlines()
    assert lines[0] == "## Why the wrong mode stalls (aware_sweep/tail_shape.csv)"
    assert lines[2] == ("The base sample's tail per mode, in brackets the geometric tail of its "
                        "mean; h = E[s / |o|] and slope = dE[T]/dtheta under a shift of every "
                        "continue logit.")  # fmt: skip
    assert lines[4:6] == ["| mode | responses | mean | P(T = 0) | variance | h | slope |",
                          "|---|---|---|---|---|---|---|"]  # fmt: skip
    assert lines[-2:] == [
        "| a | arm | mode | measured | geometric | measured tail | end state | K_ec drag | "
        "later probe | later step | later closed form |",
        "|---|---|---|---|---|---|---|---|---|---|---|"]  # no arm: the header alone
    shape = pd.DataFrame([{"level": "a80", "a": 0.8, "dial": "grpo", "mode": "wrong",
                           "measured": 0.04, "lo": np.nan, "hi": np.nan, "geometric": 0.35,
                           "measured_tail": 0.26, "end_state": 0.36, "drag": -0.09,
                           "later_probe": 0.29, "later_step": np.nan,
                           "later_closed_form": 0.25}])  # fmt: skip
    row = shape_markdown(tails, shape).splitlines()[-1]
    assert row == ("| 0.8 | grpo | wrong | +0.04 | +0.35 | +0.26 | +0.36 | -0.09 | +0.29 | n/a | "
                   "+0.25 |")  # fmt: skip
