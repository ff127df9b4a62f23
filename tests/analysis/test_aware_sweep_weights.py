"""The sweep's SGD on the mode markers' embedding rows (aware_sweep.sgd_weights: markers): the
masks, a real step that moves those two rows alone and by the unrestricted gradient's own
numbers there, the restricted kernel against the full J by hand, and the rate and predictions
read from the kernel row of the weights SGD moves."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from grpo_dial.analysis.aware.dose import kernel_of, sgd_prediction, sgd_rate, sweep_runs
from grpo_dial.analysis.aware.kernel import base_responses, mode_gradients, tail_kernel
from grpo_dial.backends.own_cells import train_cell
from grpo_dial.core.dial import arm_fields, preset, read_arm
from grpo_dial.data.tasks.aware import AwareTask
from grpo_dial.policy.masks import restrict, weight_masks

BASE = pd.DataFrame([{"core": 5.0, "tail_estimate": 3.0, "tail_compute": 1.0}])
TRAIN = {"steps": 40, "prompts_per_step": 16, "group_size": 8, "lr": 0.01, "grad_clip": 1.0}


@pytest.fixture
def tiny():
    from grpo_dial.policy.model import PolicySpec, build_char_tokenizer, build_tiny_llama

    task = AwareTask()
    tok = build_char_tokenizer(task.alphabet)
    spec = PolicySpec(n_layers=1, hidden_size=16, n_heads=2, intermediate_size=32)
    return task, tok, build_tiny_llama(spec, tok, seed=0).eval()


def _marker_ids(tok) -> list[int]:
    return [tok.convert_tokens_to_ids(m) for m in ("=", "~")]


def test_marker_masks_hold_the_two_marker_rows_of_the_embedding_and_nothing_else(tiny):
    _, tok, model = tiny
    params = [p for p in model.parameters() if p.requires_grad]
    every = weight_masks(model, tok, "all")
    assert [m.shape for m in every] == [p.shape for p in params]
    assert all(bool(m.eq(1).all()) for m in every)
    masks = weight_masks(model, tok, "markers")
    embedding = model.get_input_embeddings().weight
    for p, m in zip(params, masks, strict=True):
        if p is embedding:
            rows = m.sum(1).nonzero().squeeze(1).tolist()
            assert rows == sorted(_marker_ids(tok)) and bool(m[rows].eq(1).all())
        else:
            assert float(m.abs().sum()) == 0.0
    assert sum(float(m.sum()) for m in masks) == 2 * embedding.shape[1]


def test_marker_masks_refuse_an_unknown_setting_and_a_marker_of_two_tokens(tiny):
    _, tok, model = tiny
    with pytest.raises(ValueError, match=r"^unknown sweep weights 'rows': one of all, markers$"):
        weight_masks(model, tok, "rows")

    def two_tokens(text, add_special_tokens=True):
        return {"input_ids": [4, 5]}

    with pytest.raises(ValueError, match=r"marker '=' to be one token; the tokenizer makes 2"):
        weight_masks(model, two_tokens, "markers")


def test_a_restricted_sgd_step_moves_the_marker_rows_by_the_full_gradient_there(tiny):
    """One SGD step (lr 0.7, clipping at 1e9) on a loss that reaches every weight: with the
    markers' masks every other weight stays bit-equal, and the two rows move by -0.7 x the
    unrestricted gradient's own rows (the mask changes nothing where it is 1)."""
    _, tok, model = tiny
    ids = torch.tensor([tok.convert_tokens_to_ids(list("12+3=~15..="))])

    def loss(m):
        return m(input_ids=ids).logits.float().pow(2).mean()

    free = [p.detach().clone() for p in model.parameters()]
    full = torch.autograd.grad(loss(model), list(model.parameters()))
    rows = _marker_ids(tok)
    restrict(model, weight_masks(model, tok, "markers"))
    params = [p for p in model.parameters() if p.requires_grad]
    assert len(params) == 1 and params[0] is model.get_input_embeddings().weight
    opt = torch.optim.SGD(params, lr=0.7)
    loss(model).backward()
    torch.nn.utils.clip_grad_norm_(params, 1e9)
    opt.step()
    for p, before, g in zip(model.parameters(), free, full, strict=True):
        if p is params[0]:
            moved = (p.detach() - before).abs().sum(1).nonzero().squeeze(1).tolist()
            assert moved == sorted(rows)
            assert torch.allclose(p.detach()[rows] - before[rows], -0.7 * g[rows], atol=1e-7)
        else:
            assert torch.equal(p.detach(), before)


def test_the_markers_kernel_is_the_full_j_on_the_marker_rows(tiny):
    task, tok, model = tiny
    problems = task.problems("train", 5, 0)
    r, _ = base_responses(model, tok, task, problems, 4, 12, 1.0, torch.Generator().manual_seed(2),
                          np.random.default_rng(2))  # fmt: skip
    k = tail_kernel(model, tok, r, weights=("all", "markers")).set_index("weights")
    e, c, counts = mode_gradients(model, tok, r)
    width = model.get_input_embeddings().weight.shape[1]
    keep = torch.cat([torch.arange(i * width, (i + 1) * width) for i in _marker_ids(tok)])
    em, cm = e[keep], c[keep]  # the embedding is model.parameters()'s first tensor
    assert k.loc["all", "k_ee"] == pytest.approx(float(e @ e), rel=1e-12)
    assert k.loc["markers", "k_ee"] == pytest.approx(float(em @ em), rel=1e-12)
    assert k.loc["markers", "k_ec"] == pytest.approx(float(em @ cm), rel=1e-12)
    assert k.loc["markers", "k_cc"] == pytest.approx(float(cm @ cm), rel=1e-12)
    assert k.loc["markers", "k_diff"] == pytest.approx(float((em - cm) @ (em - cm)), rel=1e-12)
    assert k.loc["markers", "l1_compute"] == pytest.approx(float(cm.abs().sum()), rel=1e-12)
    assert k.loc["markers", "positions_estimate"] == counts["e"]
    assert k.loc["markers", "positions_compute"] == counts["c"] > 0
    assert 0 < k.loc["markers", "k_ee"] < k.loc["all", "k_ee"]


def test_a_sample_without_one_mode_gives_every_weights_row_no_kernel(tiny):
    _, tok, model = tiny
    task = AwareTask(estimate_rate=0.0)  # compute mode only: no J_~
    r, _ = base_responses(model, tok, task, task.problems("train", 3, 0), 2, 8, 1.0,
                          torch.Generator().manual_seed(0), np.random.default_rng(0))  # fmt: skip
    k = tail_kernel(model, tok, r, weights=("all", "markers"))
    assert k["weights"].tolist() == ["all", "markers"]
    assert k[["k_ee", "k_ec", "k_cc", "k_diff"]].isna().all().all()


KERNELS = pd.DataFrame(
    [{"weights": "all", "k_ee": 2.0, "k_ec": 1.9, "k_cc": 3.0, "l1_estimate": 150.0,
      "l1_compute": 250.0},
     {"weights": "markers", "k_ee": 0.5, "k_ec": 0.1, "k_cc": 0.25, "l1_estimate": 1.0,
      "l1_compute": 2.0}]
)  # fmt: skip


def test_kernel_of_picks_the_weights_row_and_names_a_missing_one():
    assert kernel_of(KERNELS, "markers").iloc[0]["k_ee"] == 0.5
    assert kernel_of(KERNELS).iloc[0]["k_ee"] == 2.0
    old = KERNELS.drop(columns="weights").iloc[[1]]  # a kernel table from before the column
    assert kernel_of(old).iloc[0]["k_ee"] == 0.5
    with pytest.raises(ValueError, match=r"no 'weights' column, so no 'markers' row"):
        kernel_of(old, "markers")
    with pytest.raises(ValueError, match=r"no row for weights 'markers' \(it has all\)"):
        kernel_of(KERNELS.iloc[[0]], "markers")


def test_the_sgd_rate_comes_from_the_markers_row_and_adams_from_every_weight():
    opts = {"estimate_rate": 0.5}
    rate = sgd_rate(preset("grpo"), BASE, KERNELS, TRAIN, opts, sgd_weights="markers").iloc[0]
    p = sgd_prediction(preset("grpo"), BASE, KERNELS.iloc[[1]], "a60", opts, TRAIN)
    assert p["step_wrong"] == pytest.approx(0.5 * p["u_wrong"] + 0.1 * p["u_correct"])
    assert p["step_correct"] == pytest.approx(0.1 * p["u_wrong"] + 0.25 * p["u_correct"])
    per_step = p["step_wrong"] - p["step_correct"]
    assert rate["lr"] == pytest.approx(0.2 / (40 * per_step))
    assert rate["lr_adam"] == pytest.approx(0.1 / 200)  # every weight's mean |J|_1
    assert rate["sgd_weights"] == "markers" and rate["k_ee"] == 0.5
    assert (rate["target"], rate["adam_step"], rate["steps"]) == (0.2, 0.1, 40)
    assert rate["contrast_per_step"] == pytest.approx(per_step)
    assert sgd_rate(preset("grpo"), BASE, KERNELS, TRAIN, opts).iloc[0]["sgd_weights"] == "all"


def test_sweep_runs_predict_sgd_through_the_markers_row_and_adam_apart():
    """4 steps, window fraction 0.5: the last window is steps 3 and 4, sampled after 2 and 3
    updates, so every prediction counts 2.5 updates of lr 3 (SGD) or 0.01 (AdamW)."""
    steps = pd.DataFrame(
        {"step": [1, 2, 3, 4], "n": 16, "accuracy": 0.5, "awareness": 0.6, "pi_wrong": 0.8,
         "pi_correct": 0.2, "auc_tail": 0.5, "core": 4.0, "tail": 3.0, "tail_estimate": 3.0,
         "tail_compute": 3.0, "tail_wrong": 3.0, "tail_correct": 3.0, "theta_estimate": 1.1,
         "theta_compute": 1.1, "truncation": 0.0, "n_estimate": 8, "n_compute": 8, "n_wrong": 8,
         "n_correct": 8, "grad_norm": 1.0, "seed": 0}
    )  # fmt: skip
    grpo = arm_fields(read_arm({"preset": "grpo"}))
    cells = pd.concat([steps.assign(optimizer=o, level="a60", dial="grpo")
                       for o in ("sgd", "adamw")])  # fmt: skip
    train = {"steps": 4, "group_size": 8, "prompts_per_step": 2, "lr": 0.01}
    # the base's tails: T_~ = 4 (estimate, wrong mode), T_= = 1.5 (compute, right mode)
    base = steps.iloc[[0]].drop(columns=["grad_norm", "seed"]).assign(
        step=0, tail_estimate=4.0, tail_compute=1.5)  # fmt: skip
    runs = sweep_runs(cells, base, KERNELS, 3.0, {"grpo": grpo}, train, {}, 0.5,
                      sgd_weights="markers").set_index("optimizer")  # fmt: skip
    p = sgd_prediction(read_arm({"preset": "grpo"}).dial, base, KERNELS.iloc[[1]], "a60", {},
                       train)  # fmt: skip
    we, wc = p["step_wrong"] * 3.0 * 2.5, p["step_correct"] * 3.0 * 2.5  # theta over 2.5 updates
    assert we > 0 > wc
    sgd, adam = runs.loc["sgd"], runs.loc["adamw"]
    expect = {"pred_theta_wrong": we, "pred_theta_correct": wc,
              "pred_contrast": 4 / 5 * we - 1.5 / 2.5 * wc, "pred_d_wrong": 4 / 5 * we,
              "pred_contrast_tokens": 4 * we - 1.5 * wc, "pred_d_wrong_tokens": 4 * we,
              "pred_d_correct_tokens": 1.5 * wc}  # fmt: skip
    for col, value in expect.items():
        assert sgd[col] == pytest.approx(value, rel=1e-12), col
        assert np.isnan(adam[col]), col
    assert adam["lr"] == 0.01
    a = {m: 2.5 * 0.01 * adam[f"snr_{m}"] / np.sqrt(1 + adam[f"snr_{m}"] ** 2)
         for m in ("wrong", "correct")}  # fmt: skip
    expect = {
        "adam_contrast": 4 / 5 * a["wrong"] - 1.5 / 2.5 * a["correct"],
        "adam_d_wrong": 4 / 5 * a["wrong"],
        "adam_contrast_tokens": 4 * a["wrong"] - 1.5 * a["correct"],
        "adam_d_wrong_tokens": 4 * a["wrong"],
        "adam_d_correct_tokens": 1.5 * a["correct"],
    }
    for col, value in expect.items():
        assert adam[col] == pytest.approx(value, rel=1e-12), col
        assert np.isnan(sgd[col]), col
    assert a["wrong"] > 0 and a["correct"] != 0


def test_the_last_window_of_60_steps_follows_53_and_a_half_updates():
    from grpo_dial.analysis.aware.runs import window_updates

    steps = pd.DataFrame({"step": np.arange(60, 0, -1)})  # any order
    assert window_updates(steps, 0.2) == 53.5  # steps 49-60 sample after 48-59 updates
    assert window_updates(steps.head(5), 0.2) == 59.0  # one step: the last, after 59
    assert window_updates(pd.DataFrame({"step": [1, 2, 3]}), 0.5) == 1.5  # round(1.5) = 2 steps


def test_train_cell_refuses_weight_decay_with_the_markers(tiny, tmp_path):
    from grpo_dial.policy.model import save_policy

    task, tok, model = tiny
    save_policy(model, tok, tmp_path / "base")
    train = {"steps": 1, "prompts_per_step": 2, "group_size": 4, "lr": 0.01, "optimizer": "sgd",
             "max_new_tokens": 12, "heldout_prompts": 2, "weight_decay": 0.1}  # fmt: skip
    with pytest.raises(ValueError, match=r"^sweep weights 'markers' with weight_decay 0.1: "):
        train_cell(str(tmp_path / "base"), {"name": "aware", "options": {}},
                   read_arm({"preset": "grpo"}), train, [0], 8, 0, weights="markers")  # fmt: skip


def test_a_markers_cell_moves_only_the_marker_rows(tiny, tmp_path, monkeypatch):
    import grpo_dial.policy.model as pm

    task, tok, model = tiny
    pm.save_policy(model, tok, tmp_path / "base")
    loaded, load = [], pm.load_policy
    monkeypatch.setattr(pm, "load_policy", lambda *a, **k: loaded.append(load(*a, **k)) or
                        loaded[-1])  # fmt: skip
    train = {"steps": 2, "prompts_per_step": 2, "group_size": 4, "lr": 5.0, "optimizer": "sgd",
             "max_new_tokens": 12, "heldout_prompts": 2}  # fmt: skip
    out = train_cell(str(tmp_path / "base"), {"name": "aware", "options": {}},
                     read_arm({"preset": "grpo"}), train, [0], 8, 0, weights="markers")  # fmt: skip
    assert out["grad_norm"].gt(0).any()
    trained = loaded[0][0]
    emb = trained.get_input_embeddings().weight.detach()
    before = model.get_input_embeddings().weight.detach()
    moved = (emb - before).abs().sum(1).nonzero().squeeze(1).tolist()
    assert moved and set(moved) <= set(_marker_ids(tok))
    for (name, p), q in zip(trained.named_parameters(), model.parameters(), strict=True):
        if "embed" not in name:
            assert torch.equal(p.detach(), q.detach()), name


def test_the_summary_says_what_each_optimizer_moved_and_at_which_rate():
    from grpo_dial.analysis.aware.dose import dose_fit, dose_table
    from grpo_dial.analysis.aware.dose_report import dose_markdown, rate_notes

    rates = pd.Series({"lr": 2.7216, "lr_adam": 0.00055, "sgd_weights": "markers", "k_ee": 0.0593,
                       "k_ec": 0.0117, "k_cc": 0.0709, "target": 0.2, "steps": 60,
                       "level": "a60", "adam_step": 0.1})  # fmt: skip
    notes = rate_notes(rates)
    assert notes["sgd"] == (
        'SGD at lr 2.72 on the rows of the mode markers "=" and "~" in the embedding alone, '
        "sized so that the closed form through their kernel (K_ee 0.0593, K_ec 0.0117, K_cc "
        "0.0709) moves the reference arm's contrast by 0.2 in theta over 60 steps at a60."
    )
    assert notes["adamw"] == ("AdamW at lr 0.00055 on every weight (a first step moves the tail "
                              "logit by at most 0.1).")  # fmt: skip
    assert "SGD at lr 2.72 on every weight," in rate_notes(rates.drop("sgd_weights"))["sgd"]
    rows = [{"optimizer": o, "level": "a60", "a": 0.6, "dial": "grpo", "seed": k,
             "contrast_tokens": 0.1 * k, "d_wrong_tokens": 0.0, "d_correct_tokens": 0.0,
             "contrast": 0.0, "d_wrong": 0.0, "d_common": 0.0, "takeoff": 0, "awareness": 0.6,
             "truncation_last": 0.0, "pred_contrast_tokens": 0.5, "snr_contrast": 1.0}
            for o in ("sgd", "adamw") for k in range(3)]  # fmt: skip
    dose = dose_table(pd.DataFrame(rows))
    text = dose_markdown(dose, dose_fit(dose), "x", notes).splitlines()
    assert text[text.index("## sgd") + 2] == notes["sgd"]
    assert text[text.index("## adamw") + 2] == notes["adamw"]
    assert "## sgd" in dose_markdown(dose, dose_fit(dose))  # no notes: the tables alone


def test_the_probes_markers_columns_are_a_real_markers_steps_move(tiny):
    """The probe's J restricted to the marker rows, projected on batch 0's gradient, against one
    real trainer step with SGD (lr 1e-3, no clip, same seed) on the marker rows alone: J . dw / lr
    per mode; the unrestricted columns stay the full J's (they differ)."""
    from dataclasses import replace

    from grpo_dial.backends.own_cells import cell_config, probe_batches
    from grpo_dial.train import loop

    task, tok, model = tiny
    task = AwareTask(score_truncated=True)
    r, _ = base_responses(model, tok, task, task.problems("train", 6, 0), 4, 12, 1.0,
                          torch.Generator().manual_seed(3), np.random.default_rng(3))  # fmt: skip
    e, c, _ = mode_gradients(model, tok, r)
    mask = torch.cat([m.reshape(-1) for m in weight_masks(model, tok, "markers")]).double()
    arm = read_arm({"preset": "grpo"})
    train = {"steps": 1, "prompts_per_step": 2, "group_size": 4, "lr": 0.5,
             "max_new_tokens": 12, "heldout_prompts": 1}  # fmt: skip
    config = cell_config(train, arm, 8, 0, 0)
    problems, heldout = task.problems("train", 8, 0), task.problems("heldout", 1, 0)
    probe = probe_batches(model, tok, task, problems, heldout, arm.dial, config, 1, e, c,
                          {"markers": (e * mask, c * mask)})  # fmt: skip
    before = [p.detach().clone() for p in model.parameters()]
    stepped = type(model)(model.config).eval()
    stepped.load_state_dict(model.state_dict())
    restrict(stepped, weight_masks(stepped, tok, "markers"))
    config = replace(config, optimizer="sgd", grad_clip=None, lr=1e-3)
    run = loop.new_run(stepped, tok, None, problems, heldout, arm.dial, config, None)
    loop.run_step(run, task, arm.dial, config, 1)
    delta = torch.cat([(p.detach() - b).reshape(-1) for p, b in
                       zip(stepped.parameters(), before, strict=True)]).double()  # fmt: skip
    assert float(delta.abs().max()) > 0 and float((delta * (1 - mask)).abs().max()) == 0.0
    row = probe.iloc[0]
    assert row["wrong_markers"] == pytest.approx(float(e @ delta) / 1e-3, rel=1e-3, abs=1e-9)
    assert row["correct_markers"] == pytest.approx(float(c @ delta) / 1e-3, rel=1e-3, abs=1e-9)
    assert row["contrast_markers"] == pytest.approx(row["wrong_markers"] - row["correct_markers"])
    assert row["wrong"] != pytest.approx(row["wrong_markers"], rel=1e-2)


def test_the_probe_summary_has_a_section_per_weights_setting():
    from grpo_dial.analysis.aware.dose import dose_fit
    from grpo_dial.analysis.aware.dose_report import probe_markdown
    from grpo_dial.analysis.aware.probe import probe_table

    tables, fits = [], []
    levels = (("a0", 0.0), ("a40", 0.4), ("a80", 0.8))
    for w, scale, k in (("all", 1.0, 1.0), ("markers", 0.001, 2.0)):  # k: predicted / measured
        rows = [{"level": lev, "a": a, "dial": "grpo", "batch": b, "wrong": scale * (a + b),
                 "correct": -scale * b, "contrast": scale * (a + 2 * b), "grad_norm": 0.5}
                for lev, a in levels for b in range(3)]  # fmt: skip
        pred = pd.DataFrame([{"level": lev, "dial": "grpo", "wrong": k * scale * a,
                              "correct": 0.0} for lev, a in levels])  # fmt: skip
        t = probe_table(pd.DataFrame(rows), pred, "grpo")
        tables.append(t.assign(weights=w))
        fits.append(dose_fit(t).assign(weights=w))
    text = probe_markdown(pd.concat(tables), pd.concat(fits)).splitlines()
    heads = [x for x in text if x.startswith("## ")]
    assert heads == [
        "## The one-step probe (aware_sweep/probe.csv), SGD on weights `all`",
        "## The one-step probe (aware_sweep/probe.csv), SGD on weights `markers`",
    ]
    rows = [x for x in text if x.startswith("| 0.8 | grpo | 3 |")]  # the contrast tables' rows
    # contrast 0.8 + 2b over b = 0, 1, 2: mean 2.8, sd 2, t(0.95, 2) 2.92 x 2 / sqrt 3 = 3.37
    assert rows[0].split(" | ")[3] == "+2800.00 [-571.71, +6171.71]"  # x 10^3
    assert rows[1].split(" | ")[3] == "+2.80 [-0.57, +6.17]"
    # each section's fit is its own: the wrong mode's measured a + 1 on predicted k a, through the
    # origin over a = 0, 0.4, 0.8: slope 2.0 / (0.8 k), 2.5 for `all` and 1.25 for `markers`
    fit_rows = [x for x in text if x.startswith("| wrong |")]
    slopes = [float(x.split(" | ")[1]) for x in fit_rows]
    assert slopes == [2.5, 1.25]
    assert text.index(fit_rows[0]) < text.index(heads[1]) < text.index(fit_rows[1])
    one = probe_markdown(tables[1].drop(columns="weights"), fits[1].drop(columns="weights"))
    assert one.startswith("## The one-step probe (aware_sweep/probe.csv)\n")
