"""The aware tail's dose-response pieces (analysis/aware/dose.py, analysis/aware/kernel.py,
analysis.aware.tabular.push_moments, the bridge's informative problems): hand numbers, the closed
form against Monte Carlo, and the tail kernel against a per-row reference."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from scipy import stats

from grpo_dial.analysis.aware.bridge import bridge_sources, length_bridge
from grpo_dial.analysis.aware.dose import (
    FROZEN,
    LEVELS,
    dose_fit,
    dose_table,
    level_awareness,
    sgd_prediction,
    sgd_rate,
)
from grpo_dial.analysis.aware.kernel import (
    base_responses,
    check_core_tokens,
    mode_gradients,
    special_mass,
    tail_kernel,
)
from grpo_dial.analysis.aware.tabular import push_moments
from grpo_dial.backends.own_cells import train_cell
from grpo_dial.core.dial import preset, read_arm
from grpo_dial.core.length_drift import sigma_moment, tail_drift
from grpo_dial.data.tasks.aware import AwareTask

BASE = pd.DataFrame([{"core": 5.0, "tail_estimate": 3.0, "tail_compute": 1.0}])
TRAIN = {"steps": 40, "prompts_per_step": 16, "group_size": 8, "lr": 0.01, "grad_clip": 1.0}


def test_levels_are_the_issues_accuracies_and_awareness():
    assert [level_awareness(k) for k in LEVELS] == [
        (pytest.approx(0.5), pytest.approx(a)) for a in (0.0, 0.2, 0.4, 0.6, 0.8)
    ]


def test_push_moments_mean_is_the_closed_form_and_the_snr_is_scale_free():
    # G 8, 4 groups, core 4 forced tokens + stop: the closed form's c = 5; tails e^theta
    theta = (float(np.log(1.5)), float(np.log(4.0)))  # (compute, estimate)
    kw = dict(compute_accuracy=0.8, estimate_accuracy=0.2, core=4, theta=theta, groups=4,
              group_size=8, batches=1500, seed=1)  # fmt: skip
    g = push_moments(preset("grpo"), **kw)
    ref = tail_drift(0.5, 0.8, 0.6, 5.0, 8, 1.0, "sequence", 0.6, eps=1e-6)
    se = g["sd_wrong"] / np.sqrt(1500)
    assert abs(g["mean_wrong"] - float(ref.wrong)) < 4 * se
    assert abs(g["mean_correct"] - float(ref.correct)) < 4 * g["sd_correct"] / np.sqrt(1500)
    assert g["snr_contrast"] == pytest.approx(g["mean_contrast"] / g["sd_contrast"])
    # alpha 0 + 1/|o|: on the same draws every group's push is GRPO's times sigma (the group's
    # std), so its mean is E[sigma^2] / E[sigma] of GRPO's while its SNR stays about GRPO's
    a0 = push_moments(read_arm({"preset": "dr_grpo", "length_norm": "sequence"}).dial, **kw)
    ratio = sigma_moment(0.5, 8, 0.0) / sigma_moment(0.5, 8, 1.0)
    assert a0["mean_wrong"] / g["mean_wrong"] == pytest.approx(ratio, rel=0.1)
    assert a0["snr_contrast"] / g["snr_contrast"] == pytest.approx(1.0, abs=0.1)
    dr = push_moments(preset("dr_grpo"), **kw)  # the constant normalizer: mean 0 at any a
    assert abs(dr["mean_contrast"]) < 4 * dr["sd_contrast"] / np.sqrt(1500)


def test_sgd_prediction_and_rate_through_a_kernel_by_hand():
    kernel = pd.DataFrame(
        [{"k_ee": 2.0, "k_ec": 1.0, "k_cc": 3.0, "l1_estimate": 150.0, "l1_compute": 250.0}]
    )
    opts = {"estimate_rate": 0.5}
    pred = sgd_prediction(preset("grpo"), BASE, kernel, "a40", opts, TRAIN)
    u = tail_drift(0.5, 0.75, 0.5, 5.0, 8, 1.0, "sequence", 0.4, eps=1e-6)  # a 0.4 at p 0.5
    assert pred["u_wrong"] == pytest.approx(float(u.wrong), rel=1e-9)
    assert pred["step_wrong"] == pytest.approx(2 * float(u.wrong) + 1 * float(u.correct))
    assert pred["step_correct"] == pytest.approx(1 * float(u.wrong) + 3 * float(u.correct))
    rate = sgd_rate(preset("grpo"), BASE, kernel, TRAIN, opts).iloc[0]
    at60 = sgd_prediction(preset("grpo"), BASE, kernel, "a60", opts, TRAIN)
    per_step = at60["step_wrong"] - at60["step_correct"]
    assert rate["lr"] == pytest.approx(0.2 / (40 * per_step)) and rate["level"] == "a60"
    assert rate["lr_adam"] == pytest.approx(0.1 / 200)  # ADAM_STEP over the mean |J|_1
    with pytest.raises(ValueError, match="not > 0"):
        sgd_rate(preset("dr_grpo"), BASE, kernel, TRAIN, opts)


def _dose_runs() -> pd.DataFrame:
    rows = []
    for lev, a in (("a0", 0.0), ("a60", 0.6)):
        for k in range(4):
            up = lev == "a60" and k < 3
            c = (2.0 if up else 0.1 * (k - 1.5)) + 0.0
            rows.append(
                {"optimizer": "sgd", "level": lev, "a": a, "dial": "grpo", "seed": k,
                 "contrast_tokens": c, "d_wrong_tokens": c / 2, "contrast": c / 4,
                 "d_wrong": c / 8, "d_common": -0.1, "takeoff": int(up), "awareness": a,
                 "truncation_last": 0.01 * k, "pred_contrast_tokens": 1.5 * a,
                 "pred_d_wrong_tokens": 0.75 * a, "snr_contrast": 3 * a, "snr_wrong": 2 * a,
                 "d_correct_tokens": -c / 2, "snr_correct": -a}
            )  # fmt: skip
    return pd.DataFrame(rows)


def test_dose_table_tests_take_offs_against_the_blind_level():
    t = dose_table(_dose_runs()).set_index(["level", "quantity"])
    r = t.loc[("a60", "contrast_tokens")]
    assert r["mean"] == pytest.approx((6.0 + 0.15) / 4)
    assert (r["n_up"], r["n_pos"], r["n_neg"]) == (3, 4, 0)
    # 3 of 4 against 0 of 4: 2 x (C(4,3) C(4,0) + C(4,4)...) / C(8,3) -> scipy's exact
    from scipy.stats import fisher_exact

    assert r["takeoff_p"] == pytest.approx(fisher_exact([[3, 1], [0, 4]]).pvalue)
    assert np.isnan(t.loc[("a0", "contrast_tokens"), "takeoff_p"])
    assert r["predicted"] == pytest.approx(0.9) and r["snr"] == pytest.approx(1.8)
    assert t.loc[("a60", "d_wrong_tokens"), "snr"] == pytest.approx(1.2)  # the wrong push's
    assert t.loc[("a60", "d_correct_tokens"), "snr"] == pytest.approx(-0.6)  # the correct one's
    assert np.isnan(t.loc[("a60", "d_correct_tokens"), "predicted"])  # no pred_ column given
    assert np.isnan(t.loc[("a60", "d_common"), "predicted"])
    assert r["truncation_last"] == pytest.approx(0.03)
    # BH over grpo's two levels: a0's p is 1 (+-0.05, +-0.15), a60's 1/8 (all four up): 2/8
    a0 = t.loc[("a0", "contrast_tokens")]
    assert (r["wilcoxon_p"], a0["wilcoxon_p"]) == (pytest.approx(0.125), pytest.approx(1.0))
    assert (r["wilcoxon_bh"], a0["wilcoxon_bh"]) == (pytest.approx(0.25), pytest.approx(1.0))


def test_bh_adjust_by_hand():
    from grpo_dial.analysis.aware.seeds import bh_adjust

    # sorted .01 .03 .04 .5 (m = 4): x 4/1, 4/2, 4/3, 4/4 = .04 .06 .0533 .5, then the running
    # minimum from the top: .04 .0533 .0533 .5
    out = bh_adjust([0.01, 0.04, 0.03, np.nan, 0.5])
    assert out[[0, 1, 2, 4]] == pytest.approx([0.04, 0.16 / 3, 0.16 / 3, 0.5])
    assert np.isnan(out[3]) and np.isnan(bh_adjust([np.nan])).all()


def test_dose_table_nets_every_cell_of_the_control():
    runs = _dose_runs()
    frozen = runs[runs["level"] == "a60"].assign(
        optimizer="adamw", dial=FROZEN, contrast_tokens=[-0.1, -0.3, -0.2, -0.2]
    )
    t = dose_table(pd.concat([runs, frozen])).set_index(["optimizer", "level", "dial", "quantity"])
    r = t.loc[("sgd", "a60", "grpo", "contrast_tokens")]
    # grpo at a60: 2, 2, 2, 0.15 (mean 1.5375); the control's mean -0.2 (an AdamW run nets SGD's)
    x, y = np.array([2.0, 2.0, 2.0, 0.15]), np.array([-0.1, -0.3, -0.2, -0.2])
    vx, vy = x.var(ddof=1) / 4, y.var(ddof=1) / 4
    nu = (vx + vy) ** 2 / (vx**2 / 3 + vy**2 / 3)
    from scipy import stats

    h = stats.t.ppf(0.95, nu) * np.sqrt(vx + vy)
    assert r["net"] == pytest.approx(1.7375)
    assert (r["net_lo"], r["net_hi"]) == (pytest.approx(1.7375 - h), pytest.approx(1.7375 + h))
    assert t.loc[("sgd", "a0", "grpo", "contrast_tokens"), "net"] == pytest.approx(0.2)
    assert np.isnan(t.loc[("adamw", "a60", FROZEN, "contrast_tokens"), "net"])  # not itself
    assert np.isnan(dose_table(runs)["net"]).all()  # no control: no net
    from grpo_dial.analysis.aware.dose_report import dose_markdown

    dose = dose_table(pd.concat([runs, frozen]))
    lines = dose_markdown(dose, dose_fit(dose)).splitlines()
    row = next(line for line in lines if line.startswith("| 0.6 | grpo | 4 |")).split(" | ")
    w = t.loc[("sgd", "a60", "grpo", "d_wrong_tokens")]
    assert row[6] == f"{r['net']:+.2f} [{r['net_lo']:+.2f}, {r['net_hi']:+.2f}]"  # the contrast's
    wrong = lines.index("Drift of the wrong mode (estimate, `~`), tokens.")
    mode = next(x for x in lines[wrong:] if x.startswith("| 0.6 | grpo | ")).split(" | ")
    assert mode[4] == f"{w['net']:+.2f} [{w['net_lo']:+.2f}, {w['net_hi']:+.2f}]"  # wrong mode's
    control = next(line for line in lines if line.startswith(f"| 0.6 | {FROZEN} |")).split(" | ")
    assert control[6] == "n/a"
    adamw = lines.index("## adamw")  # the control's section
    wrong = lines.index("Drift of the wrong mode (estimate, `~`), tokens.", adamw)
    control = next(x for x in lines[wrong:] if x.startswith(f"| 0.6 | {FROZEN} |")).split(" | ")
    assert control[4] == "n/a"


def test_dose_table_at_another_level_and_its_other_columns():
    runs = _dose_runs()
    runs["adam_contrast_tokens"] = 0.1 * runs["seed"]  # 0, .1, .2, .3: mean 0.15
    runs.loc[(runs["level"] == "a0") & (runs["seed"] == 0), "takeoff"] = 1  # one blind take-off
    runs.loc[(runs["level"] == "a60") & (runs["seed"] == 3), "takeoff"] = -1  # one down
    runs["awareness"] = runs["a"] + 0.01 * runs["seed"]
    frozen = runs[runs["level"] == "a60"].assign(
        optimizer="adamw", dial=FROZEN, contrast_tokens=[-0.1, -0.3, -0.2, -0.2]
    )
    t = dose_table(pd.concat([runs.iloc[::-1], frozen]), level=0.8)
    assert list(dict.fromkeys(t["level"])) == ["a60", "a0"]  # the runs' order, not sorted
    t = t.set_index(["optimizer", "level", "dial", "quantity"])
    r = t.loc[("sgd", "a60", "grpo", "contrast_tokens")]
    x = np.array([2.0, 2.0, 2.0, 0.15])
    h = stats.t.ppf(0.9, 3) * x.std(ddof=1) / 2  # an 80 % interval
    assert (r["lo"], r["hi"]) == (pytest.approx(x.mean() - h), pytest.approx(x.mean() + h))
    y = np.array([-0.1, -0.3, -0.2, -0.2])
    vx, vy = x.var(ddof=1) / 4, y.var(ddof=1) / 4
    hn = stats.t.ppf(0.9, (vx + vy) ** 2 / (vx**2 / 3 + vy**2 / 3)) * np.sqrt(vx + vy)
    assert r["net_lo"] == pytest.approx(x.mean() - y.mean() - hn)
    assert (r["n_up"], r["n_down"]) == (3, 1)
    assert r["takeoff_p"] == pytest.approx(stats.fisher_exact([[3, 1], [1, 3]]).pvalue)
    assert r["adam_tabular"] == pytest.approx(0.15)
    assert np.isnan(t.loc[("sgd", "a60", "grpo", "d_wrong_tokens"), "adam_tabular"])  # no column
    assert r["awareness_measured"] == pytest.approx(0.6 + 0.015)
    # fewer than three control seeds: the net has no interval and prints bare
    from grpo_dial.analysis.aware.dose_report import dose_markdown

    two = dose_table(pd.concat([runs, frozen.iloc[:2]]))
    c = two.set_index(["level", "dial", "quantity"]).loc[("a60", "grpo", "contrast_tokens")]
    assert np.isnan(c["net_lo"]) and c["net"] == pytest.approx(x.mean() + 0.2)
    row = next(x for x in dose_markdown(two, dose_fit(two)).splitlines()
               if x.startswith("| 0.6 | grpo | 4 |")).split(" | ")  # fmt: skip
    assert row[6] == f"{c['net']:+.2f}"


def test_dose_markdown_prints_the_tables_numbers():
    from grpo_dial.analysis.aware.dose_report import dose_markdown

    runs = _dose_runs()
    dose = dose_table(runs.assign(optimizer=np.where(runs["seed"] < 4, "sgd", "adamw")))
    text = dose_markdown(dose, dose_fit(dose), "aware_sweep/dose.csv, seeds 0-3")
    assert "From aware_sweep/dose.csv, seeds 0-3." in text and "## sgd" in text
    r = dose.set_index(["level", "quantity"]).loc[("a60", "contrast_tokens")]
    cell = f"{r['mean']:+.2f} [{r['lo']:+.2f}, {r['hi']:+.2f}]"
    row = next(line for line in text.splitlines() if line.startswith("| 0.6 | grpo | 4 |"))
    assert row.split(" | ")[3] == cell  # contrast in tokens, then its p values and prediction
    assert f"{r['sign_p']:.2g} / {r['wilcoxon_p']:.2g} ({r['wilcoxon_bh']:.2g}) |" in row
    assert "| +0.90 |" in row
    # seeds 2, 2, 2, 0.15: sd 0.925, se 0.4625, 3 degrees of freedom; the smallest mean a 90 %
    # t test tells from 0 at 80 % power is 3.30 se (tests/analysis/test_seed_stats.py's integral)
    assert r["detectable"] == pytest.approx(3.29943 * 0.4625, rel=1e-5)
    assert row.endswith(f"| {r['detectable']:.2f} ({100 * r['power']:.0f} %) |")
    lines = text.splitlines()
    wrong = next(x for x in lines[lines.index("Drift of the wrong mode (estimate, `~`), tokens."):]
                 if x.startswith("| 0.6 | grpo | "))  # fmt: skip
    assert wrong.endswith("| 3.0 % |")  # the largest last-window truncated share, 0.03
    assert "## adamw" not in text  # one optimizer in the table, one section


def test_dose_fit_predictor_per_optimizer_and_the_groups_it_skips():
    def cells(opt, q, predicted, snr, mean):
        return pd.DataFrame({"optimizer": opt, "quantity": q, "predicted": predicted,
                             "snr": snr, "mean": mean})  # fmt: skip

    dose = pd.concat([
        cells("sgd", "d_wrong", [0.0, 1.0], np.nan, [0.0, 1.0]),  # two cells: skipped
        cells("sgd", "d_common", [1.0, 1.0, 1.0], np.nan, [0.0, 0.5, 1.0]),  # constant x: skipped
        cells("sgd", "contrast", [0.0, 1.0, 2.0], np.nan, [0.0, 0.5, 1.0]),
        cells("adamw", "contrast", [5.0, 5.0, 5.0], [0.0, 1.0, 4.0], [0.0, 0.2, 0.8]),
    ])  # fmt: skip
    f = dose_fit(dose)
    assert list(zip(f["optimizer"], f["predictor"], strict=True)) == [
        ("sgd", "predicted"), ("adamw", "snr")]  # fmt: skip
    assert f["slope"].tolist() == pytest.approx([0.5, 0.2])  # Adam's on the SNR, not "predicted"
    assert f["intercept"].tolist() == pytest.approx([0.0, 0.0], abs=1e-12)


def test_dose_fit_slope_through_the_origin_by_hand():
    dose = pd.DataFrame(
        {"optimizer": "sgd", "quantity": "contrast_tokens", "predicted": [0.0, 1.0, 2.0, 3.0],
         "snr": np.nan, "mean": [0.1, 0.9, 2.2, 2.9]}
    )  # fmt: skip
    f = dose_fit(dose).iloc[0]
    x, y = np.array([0, 1, 2, 3.0]), np.array([0.1, 0.9, 2.2, 2.9])
    slope = x @ y / (x @ x)
    assert f["slope"] == pytest.approx(slope)
    assert f["r2"] == pytest.approx(1 - ((y - slope * x) ** 2).sum() / ((y - y.mean()) ** 2).sum())
    assert f["spearman"] == pytest.approx(1.0) and f["predictor"] == "predicted"
    # the line with an intercept: centred x -1.5 -0.5 0.5 1.5, centred y -1.425 -0.625 0.675
    # 1.375: slope 4.85 / 5 = 0.97, intercept 1.525 - 0.97 x 1.5 = 0.07
    xc, yc = x - x.mean(), y - y.mean()
    b = (xc @ yc) / (xc @ xc)
    assert f["slope_affine"] == pytest.approx(0.97) and f["intercept"] == pytest.approx(0.07)
    assert f["r2_affine"] == pytest.approx(1 - ((y - y.mean() + b * x.mean() - b * x) ** 2).sum()
                                           / (yc**2).sum())  # fmt: skip
    from grpo_dial.analysis.aware.dose import DOSE_COLUMNS
    from grpo_dial.analysis.aware.dose_report import dose_markdown

    text = dose_markdown(pd.DataFrame(columns=DOSE_COLUMNS), dose_fit(dose))
    line = next(x for x in text.splitlines() if x.startswith("| sgd | contrast_tokens |"))
    assert line.endswith(f"| {slope:.3g} | {f['r2']:.2f} | +1.00 (0) | 0.97 | +0.070 | "
                         f"{f['r2_affine']:.2f} | 4 |")  # fmt: skip


# --------------------------------------------------------------------------- the base policy


@pytest.fixture(scope="module")
def tiny():
    from grpo_dial.policy.model import PolicySpec, build_char_tokenizer, build_tiny_llama

    task = AwareTask()
    tok = build_char_tokenizer(task.alphabet)
    spec = PolicySpec(n_layers=1, hidden_size=16, n_heads=2, intermediate_size=32)
    return task, tok, build_tiny_llama(spec, tok, seed=0).eval()


def _sample(tiny, n_problems=4, samples=4, seed=0):
    task, tok, model = tiny
    problems = task.problems("train", n_problems, 0)
    gen = torch.Generator().manual_seed(seed)
    return base_responses(model, tok, task, problems, samples, 12, 1.0, gen,
                          np.random.default_rng(seed))  # fmt: skip


def test_base_responses_are_a_step_zero_responses_table(tiny):
    r, table = _sample(tiny)
    assert len(table) == 16 and (table["step"] == 0).all() and (table["resample_round"] == 0).all()
    assert table["prefix"].str[0].isin(["=", "~"]).all()
    assert [t.startswith(p) for t, p in zip(r.texts, table["prefix"], strict=True)] == [True] * 16
    # no special token sampled: one character per token; tokens = characters + EOS if finished
    assert (table["tokens"] == table["length"] + (~table["truncated"]).astype(int)).all()
    assert table["group"].tolist() == [g for g in range(4) for _ in range(4)]


@pytest.mark.parametrize("chunk", [64, 5])  # one forward, or chunks of 5 rows (a short last one)
def test_special_mass_is_the_softmax_mass_the_sampler_masks(tiny, chunk, monkeypatch):
    monkeypatch.setattr("grpo_dial.analysis.aware.kernel.CHUNK", chunk)
    task, tok, model = tiny
    r, _ = _sample(tiny)
    ids = torch.cat([r.prompt_ids, r.response_ids], 1)
    mask = torch.cat([r.prompt_mask, r.response_mask], 1)
    p = r.prompt_ids.shape[1]
    total, count = 0.0, 0
    with torch.no_grad():
        for i in range(len(r)):  # one row at a time, its real tokens only
            keep = mask[i].bool()
            row = ids[i][keep][None]
            logits = model(input_ids=row).logits[0]
            n_prompt = int(r.prompt_mask[i].sum())
            for t in range(int(r.response_mask[i].sum())):
                probs = torch.softmax(logits[n_prompt - 1 + t], -1)
                total += float(probs[[tok.pad_token_id, tok.bos_token_id, tok.unk_token_id]].sum())
                count += 1
    assert p >= 1 and special_mass(model, tok, r) == pytest.approx(total / count, rel=1e-4)


@pytest.mark.parametrize("chunk", [64, 5, 1])  # chunks of 1 row: some hold no row of a mode
def test_tail_kernel_against_a_per_row_reference(tiny, chunk, monkeypatch):
    monkeypatch.setattr("grpo_dial.analysis.aware.kernel.CHUNK", chunk)
    task, tok, model = tiny
    r, table = _sample(tiny, n_problems=6, samples=4, seed=3)
    k = tail_kernel(model, tok, r).iloc[0]
    params = [p for p in model.parameters() if p.requires_grad]
    eos = tok.eos_token_id
    allowed = [i for i in range(len(tok)) if i not in (eos, tok.pad_token_id, tok.bos_token_id,
                                                        tok.unk_token_id)]  # fmt: skip
    grads = {}
    for mode in ("~", "="):
        acc, n = [torch.zeros_like(p) for p in params], 0
        for i in range(len(r)):
            if table["prefix"].iloc[i][0] != mode:
                continue
            keep = torch.cat([r.prompt_mask[i], r.response_mask[i]]).bool()
            row = torch.cat([r.prompt_ids[i], r.response_ids[i]])[keep][None]
            logits = model(input_ids=row).logits[0]
            n_prompt, forced = int(r.prompt_mask[i].sum()), int(r.forced[i])
            for t in range(forced, int(r.response_mask[i].sum())):  # the tail's decisions
                z = logits[n_prompt - 1 + t]
                cont = torch.logsumexp(z[allowed], 0) - z[eos]
                for a, g in zip(acc, torch.autograd.grad(cont, params, retain_graph=True),
                                strict=True):  # fmt: skip
                    a += g
                n += 1
        grads[mode] = torch.cat([a.reshape(-1) for a in acc]).double() / n
    e, c = grads["~"], grads["="]
    assert k["k_ee"] == pytest.approx(float(e @ e), rel=1e-4)
    assert k["k_ec"] == pytest.approx(float(e @ c), rel=1e-4)
    assert k["k_diff"] == pytest.approx(float((e - c) @ (e - c)), rel=1e-3)
    assert k["l1_estimate"] == pytest.approx(float(e.abs().sum()), rel=1e-4)


def test_a_core_not_written_one_token_per_character_is_refused():
    check_core_tokens(["=12", "~7"], np.array([3, 2]))
    with pytest.raises(ValueError, match=r"^the tokenizer writes the forced core '~70' in 2 "
                                         r"tokens, not one per character, which the aware tables "
                                         r"assume; use a tokenizer that splits digits and the "
                                         r"modes '=' and '~'$"):
        check_core_tokens(["=12", "~70"], np.array([3, 2]))  # "~7" merged into one token


def test_a_mode_no_response_opens_with_has_no_gradient_and_a_nan_kernel(tiny):
    _, tok, model = tiny
    task = AwareTask(estimate_rate=0.0)  # every core opens with "=": no estimate-mode position
    problems = task.problems("train", 3, 0)
    r, _ = base_responses(model, tok, task, problems, 4, 12, 1.0, torch.Generator().manual_seed(1),
                          np.random.default_rng(1))  # fmt: skip
    e, c, counts = mode_gradients(model, tok, r)
    assert e is None and counts["e"] == 0 and counts["c"] > 0 and float(c.abs().sum()) > 0
    k = tail_kernel(model, tok, r).iloc[0]
    assert np.isnan([k["k_ee"], k["k_ec"], k["k_cc"], k["k_diff"]]).all()


def test_train_cell_trains_every_seed_with_the_trainers_step(tiny, tmp_path):
    from grpo_dial.core.dial import read_arm as arm_of
    from grpo_dial.policy.model import save_policy

    task, tok, model = tiny
    save_policy(model, tok, tmp_path / "base")
    train = {"steps": 2, "prompts_per_step": 2, "group_size": 4, "lr": 0.01,
             "max_new_tokens": 12, "heldout_prompts": 2}  # fmt: skip
    out = train_cell(str(tmp_path / "base"), {"name": "aware", "options": {}},
                     arm_of({"preset": "grpo"}), train, [0, 5], 8, 0)  # fmt: skip
    assert out.groupby("seed")["step"].apply(list).to_dict() == {0: [1, 2], 5: [1, 2]}
    assert out["n"].eq(8).all() and out["grad_norm"].notna().all()
    a, b = (out[out["seed"] == s] for s in (0, 5))
    assert not np.allclose(a["tail"].to_numpy(), b["tail"].to_numpy())  # seeds differ


@pytest.mark.parametrize("frozen", [True, False])
def test_the_tail_frozen_cell_never_moves_the_policy(tiny, tmp_path, monkeypatch, frozen):
    import grpo_dial.policy.model as pm
    from grpo_dial.core.dial import read_arm as arm_of

    task, tok, model = tiny
    pm.save_policy(model, tok, tmp_path / "base")
    loaded, load = [], pm.load_policy
    monkeypatch.setattr(pm, "load_policy", lambda *a, **k: loaded.append(load(*a, **k)) or
                        loaded[-1])  # fmt: skip
    train = {"steps": 2, "prompts_per_step": 2, "group_size": 4, "lr": 0.05,
             "max_new_tokens": 12, "heldout_prompts": 2, "optimizer": "adamw"}  # fmt: skip
    out = train_cell(str(tmp_path / "base"), {"name": "aware", "options": {}},
                     arm_of({"preset": "grpo"}), train, [0], 8, 0, frozen=frozen)  # fmt: skip
    moved = max(float((p - q).abs().max()) for p, q in
                zip(loaded[0][0].parameters(), model.parameters(), strict=True))  # fmt: skip
    assert out["grad_norm"].gt(0).all()  # the gradient is there; the frozen arm does not step
    assert (moved == 0.0) if frozen else (moved > 1e-3)


def test_sweep_runs_predicts_the_frozen_arm_zero():
    from grpo_dial.analysis.aware.dose import FROZEN, sweep_runs
    from grpo_dial.core.dial import arm_fields, read_arm

    steps = pd.DataFrame(
        {"step": [1, 2], "n": 16, "accuracy": 0.5, "awareness": 0.6, "pi_wrong": 0.8,
         "pi_correct": 0.2, "auc_tail": 0.5, "core": 4.0, "tail": 3.0, "tail_estimate": 3.0,
         "tail_compute": 3.0, "tail_wrong": 3.0, "tail_correct": 3.0, "theta_estimate": 1.1,
         "theta_compute": 1.1, "truncation": 0.0, "n_estimate": 8, "n_compute": 8, "n_wrong": 8,
         "n_correct": 8, "grad_norm": 1.0, "seed": 0}
    )  # fmt: skip
    grpo = arm_fields(read_arm({"preset": "grpo"}))
    cells = pd.concat([steps.assign(optimizer="adamw", level="a60", dial=d)
                       for d in ("grpo", FROZEN)])  # fmt: skip
    train = {"steps": 2, "group_size": 8, "prompts_per_step": 2, "lr": 0.01}
    kernel = pd.DataFrame([{"k_ee": 1.0, "k_ec": 0.5, "k_cc": 1.0}])
    base = steps.iloc[[0]].drop(columns=["grad_norm", "seed"]).assign(step=0)
    runs = sweep_runs(cells, base, kernel, 0.1, {"grpo": grpo, FROZEN: grpo}, train,
                      {}, 0.5).set_index("dial")  # fmt: skip
    assert runs.loc["grpo", "snr_contrast"] > 0 and runs.loc["grpo", "adam_contrast"] > 0
    assert runs.loc[FROZEN, "lr"] == 0.0
    for col in ("snr_contrast", "snr_wrong", "adam_contrast", "adam_d_wrong_tokens"):
        assert runs.loc[FROZEN, col] == 0.0


# --------------------------------------------------------------------------- the bridge


def test_the_bridge_counts_its_informative_problems_and_sources():
    rows = []
    for g, k in enumerate((8, 8, 0, 3, 5)):  # two unanimous-correct, one all-wrong, two mixed
        for i in range(8):
            rows.append({"problem_id": f"p{g}", "correct": i < k, "length_chars": 100 + i})
    df = pd.DataFrame(rows)
    b = length_bridge(df, n_boot=20).set_index("quantity")
    assert (b.loc["auc", "n_problems"], b.loc["auc", "n_informative"]) == (5, 2)
    assert b.loc["auc", "n_pairs"] == 3 * 5 + 5 * 3
    both = bridge_sources(
        pd.concat([df.assign(source="math_cot_100"), df.assign(source="gsm8k")]), n_boot=20
    )
    assert list(dict.fromkeys(both["source"])) == ["math_cot_100", "gsm8k"]
    with pytest.raises(ValueError, match="no math_cot_100 or gsm8k"):
        bridge_sources(df.assign(source="other"), n_boot=20)


def _figure_inputs() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Three levels of grpo under both optimizers and the control: the dose table and its fit."""
    runs = _dose_runs()
    a60 = runs[runs["level"] == "a60"]
    a80 = a60.assign(level="a80", a=0.8, contrast_tokens=a60["contrast_tokens"] + 1,
                     pred_contrast_tokens=1.2, snr_contrast=2.4)  # fmt: skip
    runs = pd.concat([runs, a80])
    frozen = runs[runs["level"] == "a60"].assign(
        optimizer="adamw", dial=FROZEN, contrast_tokens=[-0.1, -0.3, -0.2, -0.2]
    )
    adamw = runs.assign(optimizer="adamw", contrast_tokens=runs["contrast_tokens"] + 0.5,
                        d_wrong_tokens=runs["d_wrong_tokens"] - 0.3)  # fmt: skip
    dose = dose_table(pd.concat([runs, adamw, frozen]))
    return dose, dose_fit(dose)


def test_dose_figure_plots_the_tables_numbers():
    from grpo_dial.figures.aware import dose_figure

    dose, fit = _figure_inputs()
    fig = dose_figure(dose, fit, names={"grpo": "G-label"}, control=FROZEN)
    fits = fit.set_index(["optimizer", "quantity"])
    panels = {("sgd", "contrast_tokens"): 0, ("sgd", "d_wrong_tokens"): 1,
              ("adamw", "contrast_tokens"): 2, ("adamw", "d_wrong_tokens"): 3}  # fmt: skip
    for (opt, q), i in panels.items():
        ax = fig.axes[i]
        t = dose[(dose["optimizer"] == opt) & (dose["quantity"] == q) & (dose["dial"] == "grpo")]
        t = t.sort_values("a")
        x = t["predicted" if opt == "sgd" else "snr"].to_numpy()
        bars = next(c for c in ax.containers if c.get_label() == "G-label")
        assert bars.lines[0].get_xdata() == pytest.approx(x)  # SGD on its prediction, Adam on SNR
        assert bars.lines[0].get_ydata() == pytest.approx(t["mean"].to_numpy())
        ends = np.array([seg[:, 1] for seg in bars.lines[2][0].get_segments()])
        assert ends == pytest.approx(t[["lo", "hi"]].to_numpy())  # the 90 % interval
        span = np.array([min(x.min(), 0.0), max(x.max(), 0.0)])
        lines = {ln.get_linestyle(): ln for ln in ax.get_lines()}
        f = fits.loc[(opt, q)]
        slope = 1.0 if opt == "sgd" else f["slope"]  # y = x, or Adam's fitted slope
        assert lines[":"].get_xdata() == pytest.approx(span)
        assert lines[":"].get_ydata() == pytest.approx(slope * span)
        if opt == "sgd":  # the line with its intercept, SGD's panels only
            line = f["intercept"] + f["slope_affine"] * span
            assert lines["--"].get_ydata() == pytest.approx(line)
        else:
            assert "--" not in lines
        control = dose[(dose["dial"] == FROZEN) & (dose["quantity"] == q)]["mean"].iloc[0]
        assert lines["-."].get_ydata() == pytest.approx([control, control])


def test_dose_figure_draws_measured_against_predicted(tmp_path):
    from grpo_dial.figures import save
    from grpo_dial.figures.aware import dose_figure

    dose, fit = _figure_inputs()
    fig = dose_figure(dose, fit, names={"grpo": "G-label"}, control=FROZEN)
    assert len(fig.axes) == 4
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    f = fit.set_index(["optimizer", "quantity"]).loc[("sgd", "contrast_tokens")]
    assert legend[:2] == [f"line {f['slope_affine']:.2f} x {f['intercept']:+.3f}",
                          f"{FROZEN} (the shared offset)"]  # fmt: skip
    assert "G-label" in legend
    # the control's level: a flat line at its mean contrast, -0.2, on the SGD panel too
    flat = [ln.get_ydata() for ln in fig.axes[0].get_lines() if ln.get_linestyle() == "-."]
    assert len(flat) == 1 and np.allclose(flat[0], -0.2)
    assert fig.axes[2].get_xlabel().startswith("signal-to-noise")
    row = fit.set_index(["optimizer", "quantity"]).loc[("sgd", "contrast_tokens")]
    assert fig.axes[0].get_title().splitlines()[1].startswith(f"slope {row['slope']:.3g}, ")
    fig.canvas.draw()  # the fit sits on its own line, so neighbouring titles never run together
    renderer = fig.canvas.get_renderer()
    boxes = [ax.title.get_window_extent(renderer) for ax in fig.axes]
    assert not boxes[0].overlaps(boxes[1]) and not boxes[2].overlaps(boxes[3])
    save(fig, tmp_path / "dose.png")
    assert (tmp_path / "dose.png").stat().st_size > 0
